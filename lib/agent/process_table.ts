/**
 * Reads the process table: members of a process group and process start
 * times. Linux reads `/proc`; other systems ask `ps`.
 *
 * @module
 */

import {
  HAS_PROC,
  parseProcStat,
  type ProcessStat,
  readProcStat,
} from "../process_identity.ts";

/** One row of the process table. */
export type ProcessRow = ProcessStat;

const hasProc = HAS_PROC;
const readProcRow = readProcStat;

async function readProcRowAsync(pid: number): Promise<ProcessRow | undefined> {
  try {
    return parseProcStat(pid, await Deno.readTextFile(`/proc/${pid}/stat`));
  } catch {
    return undefined;
  }
}

async function psRows(extra: string[]): Promise<ProcessRow[]> {
  const output = await new Deno.Command("ps", {
    args: [...extra, "-o", "pid=,pgid=,stat=,lstart="],
    stdout: "piped",
    stderr: "null",
  }).output();
  const rows: ProcessRow[] = [];
  for (const line of new TextDecoder().decode(output.stdout).split("\n")) {
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

/** Every live (non-zombie) process whose process group is `pgid`. */
export async function processGroupMembers(pgid: number): Promise<number[]> {
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
