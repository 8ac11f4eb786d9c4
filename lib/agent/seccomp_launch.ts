/**
 * Hands the seccomp filter (`seccomp_filter.ts`) to a confined `bwrap`
 * command. bubblewrap reads the filter from an open file descriptor
 * (`--seccomp FD`) and `Deno.Command` passes none but stdio, so the command
 * starts through a `/bin/sh` trampoline: the shell opens the filter file as
 * fd 9, deletes it, and replaces itself with `bwrap --seccomp 9 …` (same
 * pid, same process group). The file is private to the runner (a fresh
 * `0600` temporary file) and gone as soon as the shell has it open.
 * Variables a shell or the loader acts on (`SHELLOPTS`, `BASH_FUNC_*`,
 * `LD_PRELOAD`, …) never reach the shell or bwrap, which run on the host
 * unconfined: bwrap sets them inside the sandbox (`--setenv`).
 *
 * @module
 */

import { seccompFilter } from "./seccomp_filter.ts";

/** The descriptor bwrap reads the filter from. */
const FILTER_FD = "9";

/**
 * `$0` is the filter file, `"$@"` the bwrap command. Without the filter
 * open, bwrap never starts; `rm` is found on a fixed `PATH`, not the agent's.
 */
const TRAMPOLINE = `exec ${FILTER_FD}<"$0" || exit 126
PATH=/usr/bin:/bin rm -f -- "$0"
exec "$@"`;

/** Names a shell or the dynamic loader acts on at start. */
const HOST_UNSAFE_NAMES = new Set([
  "SHELLOPTS",
  "BASHOPTS",
  "BASH_ENV",
  "ENV",
  "PS4",
  "IFS",
  "CDPATH",
  "GLOBIGNORE",
]);

function unsafeOnHost(name: string): boolean {
  return HOST_UNSAFE_NAMES.has(name) || name.startsWith("BASH_FUNC_") ||
    name.startsWith("LD_") || name === "GCONV_PATH";
}

/** A confined command ready to spawn, and the filter file to remove should it not start. */
export interface SeccompLaunch {
  /** `/bin/sh -c … FILTER bwrap --seccomp 9 …`. */
  argv: string[];
  /** The environment of the shell and bwrap (the agent's, less what is set by `--setenv`). */
  env: Record<string, string>;
  /** The filter file (the trampoline deletes it; remove it if the spawn fails). */
  filterFile?: string;
}

/**
 * `bwrapArgv` (`bwrap …args -- command`, to run with the agent's `env`)
 * started with the seccomp filter of this machine's architecture (none
 * where the runner knows no filter for it).
 */
export function withSeccomp(
  bwrapArgv: readonly string[],
  env: Record<string, string>,
): SeccompLaunch {
  const hostEnv: Record<string, string> = {};
  const inside: string[] = [];
  for (const [name, value] of Object.entries(env)) {
    if (unsafeOnHost(name)) inside.push("--setenv", name, value);
    else hostEnv[name] = value;
  }
  const [bwrap, ...rest] = bwrapArgv;
  const command = [bwrap, ...inside, ...rest];
  const arch = Deno.build.arch;
  if (Deno.build.os !== "linux" || (arch !== "x86_64" && arch !== "aarch64")) {
    return { argv: command, env: hostEnv };
  }
  const filterFile = Deno.makeTempFileSync({ prefix: "runner-seccomp-" });
  try {
    Deno.writeFileSync(filterFile, seccompFilter(arch), { mode: 0o600 });
  } catch (error) {
    Deno.removeSync(filterFile);
    throw error;
  }
  return {
    argv: [
      "/bin/sh",
      "-c",
      TRAMPOLINE,
      filterFile,
      bwrap,
      "--seccomp",
      FILTER_FD,
      ...command.slice(1),
    ],
    env: hostEnv,
    filterFile,
  };
}
