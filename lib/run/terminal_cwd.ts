/**
 * A client terminal's command enters its cwd itself and runs only if the
 * kernel says it is where the policy decided: a cwd checked by name and then
 * entered again by name can be swapped for a link in between. A small
 * `/bin/sh` trampoline changes into the directory, asks the kernel for its
 * real working directory (`pwd -P`), and `exec`s the command only when that
 * is exactly the decided directory; else it prints why to stderr (the
 * terminal's output) and exits {@linkcode CWD_MOVED_EXIT} without running
 * anything. Once entered, a working directory is the directory itself, not a
 * name: swapping names no longer moves the command. Confined, the trampoline
 * runs inside the sandbox, so it checks the sandbox's own view.
 *
 * @module
 */

/** The exit code of a command that did not run because its cwd was not the decided directory. */
export const CWD_MOVED_EXIT = 126;

/**
 * `$1` the decided directory (a real path), the command from `$2` on. The
 * `echo .` keeps a directory name's trailing newlines, which `$(…)` strips.
 */
const TRAMPOLINE = [
  'cd -P -- "$1" 2>/dev/null && here=$(pwd -P && echo .) &&',
  '[ "${here%?.}" = "$1" ] || {',
  `echo "runner: the command did not run: its cwd $1 is no longer that directory (replaced, or a link to elsewhere)" >&2;`,
  `exit ${CWD_MOVED_EXIT}; };`,
  'shift; exec "$@"',
].join(" ");

/**
 * The argv that runs `argv` with its working directory `cwd` (a real path),
 * checked by the kernel's account. The shell runs privileged (`-p`): the
 * request's variables are in its environment, and a bash behind `/bin/sh`
 * then imports no functions (`BASH_FUNC_cd%%`) and ignores `SHELLOPTS`,
 * `BASHOPTS`, `CDPATH`, `ENV` and `BASH_ENV`; the trampoline uses builtins
 * only. The command still gets the whole environment.
 */
export function inDecidedCwd(cwd: string, argv: readonly string[]): string[] {
  return ["/bin/sh", "-p", "-c", TRAMPOLINE, "runner-cwd", cwd, ...argv];
}
