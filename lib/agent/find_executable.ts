/**
 * Finding a program on a `PATH`, the way a shell would: the first directory
 * holding an executable file of that name.
 *
 * @module
 */

import { join } from "node:path";

const WINDOWS = Deno.build.os === "windows";

function isExecutableFile(path: string): boolean {
  try {
    const info = Deno.statSync(path);
    return info.isFile && (info.mode === null || (info.mode & 0o111) !== 0);
  } catch {
    return false;
  }
}

/**
 * The path of `program` found on `pathValue` (a `PATH` value), or undefined.
 * A program given with a `/` is checked as it is.
 */
export function findOnPath(
  program: string,
  pathValue: string | undefined,
): string | undefined {
  if (program.includes("/")) {
    return isExecutableFile(program) ? program : undefined;
  }
  const suffixes = WINDOWS ? ["", ".exe", ".cmd", ".bat"] : [""];
  for (const dir of (pathValue ?? "").split(WINDOWS ? ";" : ":")) {
    // An empty entry means the current directory; agents never rely on it.
    if (!dir) continue;
    for (const suffix of suffixes) {
      const candidate = join(dir, program + suffix);
      if (isExecutableFile(candidate)) return candidate;
    }
  }
  return undefined;
}
