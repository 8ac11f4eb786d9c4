/**
 * The open-file limit of `runner serve`. Deno has no `setrlimit`, and the
 * runtime permission set has no `--allow-ffi`; but `--allow-run` lets the
 * runner ask util-linux `prlimit` to raise its own soft limit to the hard
 * limit (`prlimit(2)` on a process of the same user needs no privilege).
 * (The `deno` CLI itself already raises it at start; this covers runtimes that
 * do not.) Where raising is impossible (no `prlimit`, macOS) the limit stays
 * as it is and the connection cap is fitted under it. See `docs/http-api.md`
 * ("Limits").
 *
 * @module
 */

/** The open-file limit, as far as it is known. */
export interface FileLimit {
  /** The soft limit (what applies), if known. */
  soft?: number;
  /** The hard limit (how far the soft one may be raised), if known. */
  hard?: number;
  /** The soft limit before raising, when it was raised. */
  raisedFrom?: number;
  /** Why the soft limit could not be raised, when it is below the hard one. */
  note?: string;
}

function parseLimit(text: string): number | undefined {
  if (text === "unlimited") return Infinity;
  const value = Number(text);
  return Number.isInteger(value) ? value : undefined;
}

/**
 * Reads this process's open-file limits from a shell it starts (a child
 * inherits them; Deno wants `--allow-all` for `/proc/<pid>/limits`).
 */
export function readFileLimit(): FileLimit {
  try {
    const output = new Deno.Command("sh", {
      args: ["-c", "ulimit -Sn; ulimit -Hn"],
      stdin: "null",
      stdout: "piped",
      stderr: "null",
    }).outputSync();
    const [soft, hard] = new TextDecoder().decode(output.stdout).trim()
      .split(/\s+/);
    return { soft: parseLimit(soft), hard: parseLimit(hard) };
  } catch {
    return {};
  }
}

function targetLimit(hard: number): number | undefined {
  if (Number.isFinite(hard)) return hard;
  try {
    // An unlimited hard limit still stops at the kernel's nr_open.
    return parseLimit(Deno.readTextFileSync("/proc/sys/fs/nr_open").trim());
  } catch {
    return undefined;
  }
}

/**
 * Raises this process's soft open-file limit to its hard limit with
 * `prlimit`; returns the limit afterwards (with a note when it could not).
 */
export async function raiseFileLimit(): Promise<FileLimit> {
  const before = readFileLimit();
  const { soft, hard } = before;
  if (soft === undefined || hard === undefined) {
    return { note: "the open-file limit is not readable here (no sh)" };
  }
  if (soft >= hard) return before;
  const target = targetLimit(hard);
  if (target === undefined || target <= soft) return before;
  let output: Deno.CommandOutput;
  try {
    output = await new Deno.Command("prlimit", {
      args: ["--pid", String(Deno.pid), `--nofile=${target}:${hard}`],
      stdin: "null",
      stdout: "null",
      stderr: "piped",
    }).output();
  } catch (error) {
    return {
      ...before,
      note: `prlimit is not available (${
        error instanceof Error ? error.message : error
      })`,
    };
  }
  const after = readFileLimit();
  if (!output.success || (after.soft ?? 0) <= soft) {
    return {
      ...after,
      note: `prlimit failed: ${
        new TextDecoder().decode(output.stderr).trim() || `exit ${output.code}`
      }`,
    };
  }
  return { ...after, raisedFrom: soft };
}

/**
 * The connection cap that fits under the open-file limit: at most half of
 * the soft limit, so agents, pipes and the store keep descriptors to spare.
 */
export function fitConnectionCap(wanted: number, limit: FileLimit): number {
  if (limit.soft === undefined || !Number.isFinite(limit.soft)) return wanted;
  return Math.max(1, Math.min(wanted, Math.floor(limit.soft / 2)));
}
