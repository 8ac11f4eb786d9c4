/**
 * Whether a run's owning process still lives: a live process is told from a
 * gone one, a zombie or a reused pid by its state and start time, read
 * synchronously (`/proc` where it is readable — Deno wants `--allow-all` for
 * it — else `ps`, which the runtime permission set allows). The reaper
 * (`agent/process_table.ts`) reads the same table for process groups.
 *
 * @module
 */

/** One process as the process table shows it. */
interface ProcessStat {
  /** Process id. */
  pid: number;
  /** Process group id. */
  pgid: number;
  /** Single-letter state (`Z` = zombie). */
  state: string;
  /** Opaque start time; equal values mean the same process. */
  startTime: string;
}

/** Whether `/proc` describes processes here (Linux). */
const HAS_PROC: boolean = (() => {
  try {
    return Deno.build.os === "linux" && Deno.statSync("/proc/self").isDirectory;
  } catch {
    return false;
  }
})();

/** Parses the text of `/proc/<pid>/stat`. */
function parseProcStat(
  pid: number,
  text: string,
): ProcessStat | undefined {
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

/** `/proc/<pid>/stat`, parsed; undefined when there is no such process. */
function readProcStat(pid: number): ProcessStat | undefined {
  try {
    return parseProcStat(pid, Deno.readTextFileSync(`/proc/${pid}/stat`));
  } catch {
    return undefined;
  }
}

function psArgs(pid: number): Deno.CommandOptions {
  return {
    args: ["-p", String(pid), "-o", "pgid=,stat=,lstart="],
    stdout: "piped",
    stderr: "null",
  };
}

function parsePs(pid: number, stdout: Uint8Array): ProcessStat | undefined {
  const match = new TextDecoder().decode(stdout).trim().match(
    /^(\d+)\s+(\S+)\s+(.*)$/,
  );
  if (!match) return undefined;
  return {
    pid,
    pgid: Number(match[1]),
    state: match[2][0],
    startTime: match[3],
  };
}

function psStat(pid: number): ProcessStat | undefined | "unknown" {
  try {
    return parsePs(
      pid,
      new Deno.Command("ps", psArgs(pid)).outputSync().stdout,
    );
  } catch {
    return "unknown";
  }
}

/** What {@linkcode processIdentity} knows about a pid. */
export interface ProcessIdentity {
  /** Whether a live (non-zombie) process has this pid. */
  alive: boolean;
  /** Its start time, when known. */
  startTime?: string;
}

/**
 * Whether `pid` is a live, non-zombie process, with its start time. Without
 * `/proc` and `ps`, a signal-0 probe decides and the start time is unknown.
 */
export function processIdentity(pid: number): ProcessIdentity {
  const stat = HAS_PROC ? readProcStat(pid) : psStat(pid);
  if (stat === "unknown") return { alive: signalProbe(pid) };
  if (!stat || stat.state === "Z") return { alive: false };
  return { alive: true, startTime: stat.startTime };
}

/**
 * Whether `pid` is a live process, by sending it signal 0 (delivers nothing).
 * `Deno.kill` takes the number although its type lists signal names;
 * `node:process` would add its start-up cost to every command.
 */
function signalProbe(pid: number): boolean {
  try {
    Deno.kill(pid, 0 as unknown as Deno.Signal);
    return true;
  } catch (error) {
    return !(error instanceof Deno.errors.NotFound); // EPERM: alive
  }
}

/**
 * Whether the process recorded as `pid` started at `startTime` is still
 * alive: false for a gone pid, a zombie, or a pid reused by another process.
 */
export function isSameProcessAlive(pid: number, startTime?: string): boolean {
  const identity = processIdentity(pid);
  if (!identity.alive) return false;
  if (startTime === undefined || identity.startTime === undefined) return true;
  // `/proc` (clock ticks) and `ps` (a date) spell start times differently;
  // a process that read the other kind cannot compare them.
  const comparable = /^\d+$/.test(startTime) ===
    /^\d+$/.test(identity.startTime);
  return !comparable || identity.startTime === startTime;
}

let cachedOwn: { value?: string } | undefined;
let readingOwn: Promise<void> | undefined;

/** This process's start time, when the process table shows it (asked once). */
export function ownStartTime(): string | undefined {
  cachedOwn ??= { value: processIdentity(Deno.pid).startTime };
  return cachedOwn.value;
}

/**
 * Reads this process's start time in the background, so that
 * {@linkcode ownStartTime} later answers without spawning `ps` on a run's
 * way to its agent.
 */
export function prefetchOwnStartTime(): Promise<void> {
  if (cachedOwn || HAS_PROC) return Promise.resolve();
  readingOwn ??= new Deno.Command("ps", psArgs(Deno.pid)).output().then(
    (output) => {
      const stat = parsePs(Deno.pid, output.stdout);
      cachedOwn ??= {
        value: stat?.state === "Z" ? undefined : stat?.startTime,
      };
    },
    () => {}, // ownStartTime() asks again, synchronously
  );
  return readingOwn;
}

/** What {@linkcode createOwnerCheck} asks. */
export interface OwnerCheckOptions {
  /** Whether the process `pid` (started at `startTime`, if known) lives. */
  isProcessAlive: (pid: number, startTime?: string) => boolean;
  /** Whether a store instance id is open in this process. */
  isOpenHere: (instance: string) => boolean;
}

/**
 * Whether the owner of a runs-table row (`owner_pid`, `owner_start_time`,
 * `owner_instance`) is alive.
 */
export function createOwnerCheck(
  options: OwnerCheckOptions,
): (row: Record<string, unknown>) => boolean {
  return (row) => {
    if (options.isOpenHere(String(row.owner_instance))) return true;
    const pid = Number(row.owner_pid);
    // Same pid but not one of our open instances: an earlier incarnation (e.g. pid 1 in a container).
    if (!Number.isInteger(pid) || pid <= 0 || pid === Deno.pid) return false;
    const startTime = row.owner_start_time === null ||
        row.owner_start_time === undefined
      ? undefined
      : String(row.owner_start_time);
    return options.isProcessAlive(pid, startTime);
  };
}
