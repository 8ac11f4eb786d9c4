/**
 * Whether a run's owning process still lives: a live process is told from a
 * gone one, a zombie or a reused pid by its state and start time, read
 * synchronously from the process table the reaper reads too
 * (`agent/process_table.ts`).
 *
 * @module
 */

import { processIdentity, processStartTime } from "../agent/process_table.ts";

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
  if (cachedOwn) return Promise.resolve();
  readingOwn ??= processStartTime(Deno.pid).then(
    (value) => {
      cachedOwn ??= { value };
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
