/**
 * Reads the process table, the one reader for the reaper (members of a
 * process group, start times) and the store's owner-liveness check (whether
 * a pid is still the process that started then). Linux reads `/proc` where it
 * is readable (Deno wants `--allow-all` for it); other systems, and the
 * runtime permission set, ask `ps`. An empty group is known without either:
 * signal 0 to the group finds no process.
 *
 * @module
 */

/** One row of the process table. */
export interface ProcessRow {
  /** Process id. */
  pid: number;
  /** Process group id. */
  pgid: number;
  /** Single-letter state (`Z` = zombie). */
  state: string;
  /** Opaque start time; equal values mean the same process. */
  startTime: string;
}

const hasProc = (() => {
  try {
    return Deno.build.os === "linux" && Deno.statSync("/proc/self").isDirectory;
  } catch {
    return false;
  }
})();

function parseProcStat(pid: number, text: string): ProcessRow | undefined {
  // The command name may contain spaces and parentheses: split after the last ")".
  const close = text.lastIndexOf(")");
  if (close < 0) return undefined;
  const fields = text.slice(close + 2).split(" ");
  // fields[0] = state (field 3), fields[2] = pgrp (field 5), fields[19] = starttime (field 22)
  return {
    pid,
    state: fields[0],
    pgid: Number(fields[2]),
    startTime: fields[19],
  };
}

function readProcRow(pid: number): ProcessRow | undefined {
  try {
    return parseProcStat(pid, Deno.readTextFileSync(`/proc/${pid}/stat`));
  } catch {
    return undefined;
  }
}

async function readProcRowAsync(pid: number): Promise<ProcessRow | undefined> {
  try {
    return parseProcStat(pid, await Deno.readTextFile(`/proc/${pid}/stat`));
  } catch {
    return undefined;
  }
}

function psOptions(extra: string[]): Deno.CommandOptions {
  return {
    args: [...extra, "-o", "pid=,pgid=,stat=,lstart="],
    stdout: "piped",
    stderr: "null",
  };
}

async function psRows(extra: string[]): Promise<ProcessRow[]> {
  const output = await new Deno.Command("ps", psOptions(extra)).output();
  return parsePs(output.stdout);
}

function parsePs(stdout: Uint8Array): ProcessRow[] {
  const rows: ProcessRow[] = [];
  for (const line of new TextDecoder().decode(stdout).split("\n")) {
    const match = line.trim().match(/^(\d+)\s+(\d+)\s+(\S+)\s+(.*)$/);
    if (!match) continue;
    rows.push({
      pid: Number(match[1]),
      pgid: Number(match[2]),
      state: match[3][0],
      startTime: match[4],
    });
  }
  return rows;
}

/**
 * Whether any process (zombies included) is in group `pgid`: signal 0 to the
 * group (it delivers nothing) fails with ESRCH when it is empty. Costs no
 * process spawn, unlike `ps`, which the runtime permission set needs instead
 * of `/proc`. `Deno.kill` takes the number although its type lists signal
 * names; `node:process` would add its start-up cost to every command.
 */
function groupMayHaveMembers(pgid: number): boolean {
  return signalZero(-pgid);
}

/** Whether signal 0 reaches `target` (a pid, or a group as `-pgid`). */
function signalZero(target: number): boolean {
  try {
    Deno.kill(target, 0 as unknown as Deno.Signal);
    return true;
  } catch (error) {
    return !(error instanceof Deno.errors.NotFound); // EPERM: alive
  }
}

/** Every live (non-zombie) process whose process group is `pgid`. */
export async function processGroupMembers(pgid: number): Promise<number[]> {
  if (!groupMayHaveMembers(pgid)) return [];
  if (hasProc) {
    const members: number[] = [];
    for await (const entry of Deno.readDir("/proc")) {
      const pid = Number(entry.name);
      if (!Number.isInteger(pid)) continue;
      const row = await readProcRowAsync(pid);
      if (row && row.pgid === pgid && row.state !== "Z") members.push(pid);
    }
    return members;
  }
  return (await psRows(["-A"]))
    .filter((row) => row.pgid === pgid && row.state !== "Z")
    .map((row) => row.pid);
}

/** The start time of a live process, or undefined when it is gone. */
export async function processStartTime(
  pid: number,
): Promise<string | undefined> {
  if (hasProc) {
    const row = readProcRow(pid);
    return row && row.state !== "Z" ? row.startTime : undefined;
  }
  const row = (await psRows(["-p", String(pid)]))[0];
  return row && row.state !== "Z" ? row.startTime : undefined;
}

/** Synchronous start time on Linux (undefined elsewhere or when gone). */
export function processStartTimeSync(pid: number): string | undefined {
  if (!hasProc) return undefined;
  const row = readProcRow(pid);
  return row && row.state !== "Z" ? row.startTime : undefined;
}

/** What {@linkcode processIdentity} knows about a pid. */
export interface ProcessIdentity {
  /** Whether a live (non-zombie) process has this pid. */
  alive: boolean;
  /** Its start time, when known. */
  startTime?: string;
}

/**
 * Whether `pid` is a live, non-zombie process, with its start time, read
 * synchronously. Without `/proc` and `ps`, a signal-0 probe decides and the
 * start time is unknown.
 */
export function processIdentity(pid: number): ProcessIdentity {
  let row: ProcessRow | undefined;
  if (hasProc) row = readProcRow(pid);
  else {
    try {
      const options = psOptions(["-p", String(pid)]);
      row = parsePs(new Deno.Command("ps", options).outputSync().stdout)[0];
    } catch {
      return { alive: signalZero(pid) };
    }
  }
  if (!row || row.state === "Z") return { alive: false };
  return { alive: true, startTime: row.startTime };
}
