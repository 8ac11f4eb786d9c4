/**
 * Reading and writing a file only when it lies inside a directory, decided
 * by the kernel at the open rather than on a name checked before it: a name
 * checked and then opened again can be swapped for a symbolic link in
 * between (`docs/config.md`, "File access").
 *
 * On Linux the file's directory and name are found by real path first (so a
 * link inside the workspace that leads elsewhere inside still works, and one
 * that leads out is refused), then a small helper opens the file: `/bin/sh`
 * changes into the directory, asks the kernel where it landed (`pwd -P`) and
 * goes on only if that is the directory decided on; from there GNU `dd`
 * opens the file by its bare name without following a link (`nofollow`) or
 * waiting on a FIFO (`nonblock`), creating a new file only exclusively
 * (`conv=excl`) and never creating one that should exist (`conv=nocreat`).
 * A working directory is the directory itself, not a name, so nothing the
 * agent swaps meanwhile moves the open out of the workspace: nothing outside
 * is read, created or changed, even for a moment. (Deno refuses `/proc/self/fd`
 * without `--allow-all` and has no `openat`, so this cannot be done in the
 * runner's own process.) A file that changes under the open is looked up
 * again, a few times.
 *
 * Elsewhere (macOS) names are checked by real path just before the open,
 * which a racing agent can defeat (`docs/config.md`).
 *
 * @module
 */

import * as acp from "@agentclientprotocol/sdk";
import { basename, dirname, isAbsolute, join, relative, sep } from "node:path";

/** Whether `candidate` is `root` or below it (both real, absolute paths). */
export function isInside(root: string, candidate: string): boolean {
  const inside = relative(root, candidate);
  return inside === "" ||
    (inside !== ".." && !inside.startsWith(`..${sep}`) && !isAbsolute(inside));
}

/** The answer to a path outside the root. */
export function outside(path: string): acp.RequestError {
  return acp.RequestError.invalidParams(
    { path },
    "path is outside the workspace",
  );
}

/** Whether files are opened by the helper (Linux: `pwd -P` and GNU `dd`). */
const KERNEL_CHECKED = Deno.build.os === "linux";

/** Exit code of the helper when its directory is gone. */
const GONE = 66;
/** Exit code of the helper when its directory is no longer the one decided on. */
const MOVED = 65;

/**
 * `$1` the directory (a real path), `dd`'s operands from `$2` on. The
 * `echo .` keeps a name's trailing newlines, which `$(…)` strips.
 */
const HELPER = [
  `cd -P -- "$1" 2>/dev/null || exit ${GONE};`,
  `here=$(pwd -P && echo .) || exit ${GONE};`,
  `[ "\${here%?.}" = "$1" ] || exit ${MOVED};`,
  'shift; exec dd "$@" bs=65536 status=none',
].join(" ");

/** How often a file that changes under the open is looked up again. */
const ATTEMPTS = 4;

interface HelperResult {
  code: number;
  stdout: Uint8Array;
  /** `dd`'s complaint, if any. */
  said: string;
}

/** Runs `dd operands` in `directory` if the kernel puts the helper there (`/bin/sh -p`: no inherited shell settings). */
async function ddIn(
  directory: string,
  operands: string[],
  input?: string,
): Promise<HelperResult> {
  const child = new Deno.Command("/bin/sh", {
    args: ["-p", "-c", HELPER, "runner-fs", directory, ...operands],
    clearEnv: true,
    env: { PATH: "/usr/bin:/bin", LC_ALL: "C" },
    stdin: input === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (input !== undefined) {
    const writer = child.stdin.getWriter();
    // dd may have refused the file and gone: its stdin is then closed.
    await writer.write(new TextEncoder().encode(input)).catch(() => {});
    await writer.close().catch(() => {});
  }
  const { code, stdout, stderr } = await child.output();
  const said = new TextDecoder().decode(stderr).trim().replace(/^dd: /, "");
  return { code, stdout, said };
}

/** The helper's failure as an answer, or undefined when the file should be looked up again. */
function helperFailure(
  result: HelperResult,
  path: string,
): acp.RequestError | undefined {
  if (result.code === MOVED) return outside(path);
  if (result.code === GONE) return acp.RequestError.resourceNotFound(path);
  return undefined;
}

/**
 * Refuses a path no file can have, before any lookup: a NUL character, or a
 * lone surrogate (which the lookup would silently turn into U+FFFD, another
 * file's name).
 */
function checkPath(path: string): void {
  if (path.includes("\0")) {
    throw acp.RequestError.invalidParams(
      { path },
      "path contains a NUL character",
    );
  }
  if (!path.isWellFormed()) {
    throw acp.RequestError.invalidParams(
      { path },
      "path is not valid Unicode (it has a lone surrogate)",
    );
  }
}

/**
 * A failure while looking up or opening the agent's path, as the agent's
 * answer: an invalid-params error that says what went wrong without the
 * runner's real paths (which the system's messages carry).
 */
function unusable(path: string, error: unknown): acp.RequestError {
  if (error instanceof acp.RequestError) return error;
  return acp.RequestError.invalidParams(
    { path },
    `path cannot be used: ${reasonOf(error)}`,
  );
}

function reasonOf(error: unknown): string {
  if (error instanceof Deno.errors.FilesystemLoop) {
    return "a symbolic link on its way loops";
  }
  if (error instanceof Deno.errors.InvalidData) {
    return "a name on its way is not valid UTF-8";
  }
  if (error instanceof Deno.errors.PermissionDenied) {
    return "permission denied";
  }
  // "File name too long (os error 36): realpath '/…'": the part before the path.
  const system = error instanceof Error
    ? /^([^:'"/]*\(os error \d+\))/.exec(error.message)
    : null;
  return system ? system[1] : "it could not be looked up";
}

function keptChanging(path: string, said: string): acp.RequestError {
  return acp.RequestError.invalidParams(
    { path },
    `the file kept changing while it was opened${said ? ` (${said})` : ""}`,
  );
}

/** What `look` finds at `path`; undefined when nothing is there (or a parent is no directory). */
async function ifThere<T>(
  look: (path: string) => Promise<T>,
  path: string,
): Promise<T | undefined> {
  try {
    return await look(path);
  } catch (error) {
    if (
      error instanceof Deno.errors.NotFound ||
      error instanceof Deno.errors.NotADirectory
    ) return undefined;
    throw error;
  }
}

function realPathIfThere(path: string): Promise<string | undefined> {
  return ifThere(Deno.realPath, path);
}

function lstatIfThere(path: string): Promise<Deno.FileInfo | undefined> {
  return ifThere(Deno.lstat, path);
}

/**
 * The answer to a path where nothing is: outside when the nearest thing that
 * exists on its way lies outside `root` (else a link out of the workspace
 * would tell the agent which files exist out there), not found otherwise.
 */
async function missing(
  root: string,
  full: string,
  path: string,
): Promise<acp.RequestError> {
  for (let at = dirname(full);; at = dirname(at)) {
    const real = await realPathIfThere(at);
    if (real !== undefined) {
      return isInside(root, real)
        ? acp.RequestError.resourceNotFound(path)
        : outside(path);
    }
    if (at === dirname(at)) return outside(path);
  }
}

/** The real path of the existing regular file at `full` inside `root`; undefined when nothing is there. */
async function existingFile(
  root: string,
  full: string,
  path: string,
): Promise<string | undefined> {
  const real = await realPathIfThere(full);
  if (real === undefined) return undefined;
  if (!isInside(root, real)) throw outside(path);
  const info = await Deno.stat(real);
  if (!info.isFile) {
    throw acp.RequestError.invalidParams(
      { path },
      info.isDirectory ? "path is a directory" : "path is not a regular file",
    );
  }
  return real;
}

/**
 * The text of the file at `full` (absolute; `path` as the agent named it)
 * if it lies inside `root` (a real path); else an error, and nothing outside
 * was opened.
 */
export async function readInside(
  root: string,
  full: string,
  path: string,
): Promise<string> {
  checkPath(path);
  try {
    return await readChecked(root, full, path);
  } catch (error) {
    throw unusable(path, error);
  }
}

async function readChecked(
  root: string,
  full: string,
  path: string,
): Promise<string> {
  let said = "";
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const real = await existingFile(root, full, path);
    if (real === undefined) throw await missing(root, full, path);
    if (!KERNEL_CHECKED) return await Deno.readTextFile(real);
    const result = await ddIn(dirname(real), [
      `if=./${basename(real)}`,
      "iflag=nofollow,nonblock",
    ]);
    if (result.code === 0) return new TextDecoder().decode(result.stdout);
    const failure = helperFailure(result, path);
    if (failure) throw failure;
    said = result.said;
  }
  throw keptChanging(path, said);
}

/** Options for {@linkcode writeInside}. */
export interface WriteInsideOptions {
  /** The directory writes stay in (a real path). */
  root: string;
  /** The file, absolute. */
  full: string;
  /** The path as the agent named it (for errors). */
  path: string;
  /** The text to write. */
  content: string;
  /** Decides on the real path about to be written; false: refused, nothing written. */
  mayWrite?: (real: string) => boolean;
}

/**
 * Writes `content` to the file at `full` if it lies inside `root`: an
 * existing file (or one a link inside leads to) is replaced in place, a new
 * one is created; a link to a missing file is refused. Nothing outside
 * `root` is created or changed.
 */
export async function writeInside(options: WriteInsideOptions): Promise<void> {
  checkPath(options.path);
  try {
    await writeChecked(options);
  } catch (error) {
    throw unusable(options.path, error);
  }
}

async function writeChecked(options: WriteInsideOptions): Promise<void> {
  const { root, full, path } = options;
  let said = "";
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const existing = await existingFile(root, full, path);
    let target: string;
    if (existing !== undefined) {
      target = existing;
    } else {
      if ((await lstatIfThere(full))?.isSymlink) {
        throw acp.RequestError.invalidParams(
          { path },
          "path is a symbolic link to a missing file",
        );
      }
      const parent = await realPathIfThere(dirname(full));
      if (parent === undefined) throw await missing(root, full, path);
      if (!isInside(root, parent)) throw outside(path);
      target = join(parent, basename(full));
    }
    if (options.mayWrite && !options.mayWrite(target)) {
      throw acp.RequestError.invalidParams(
        { path },
        "the run's permission rules reject this write",
      );
    }
    if (!KERNEL_CHECKED) {
      await Deno.writeTextFile(target, options.content);
      return;
    }
    const result = await ddIn(dirname(target), [
      `of=./${basename(target)}`,
      existing === undefined ? "conv=excl" : "conv=nocreat",
      "oflag=nofollow,nonblock",
    ], options.content);
    if (result.code === 0) return;
    const failure = helperFailure(result, path);
    if (failure) throw failure;
    said = result.said;
  }
  throw keptChanging(path, said);
}
