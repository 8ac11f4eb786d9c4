/**
 * The reaper: records each agent's process group in the data directory so
 * that groups left behind by a runner that was SIGKILLed are killed on the
 * next start. Records carry start times so a reused pid is never killed.
 *
 * @module
 */

import { join } from "node:path";
import { killGroup } from "./process_group.ts";
import {
  processGroupMembers,
  processStartTime,
  processStartTimeSync,
} from "./process_table.ts";

/** A registered agent group; `release` drops the record after a clean teardown. */
export interface ReaperRegistration {
  /** Removes the record. */
  release(): void;
}

/** Records agent process groups in a directory. */
export interface ReaperRegistry {
  /** Records the group led by `pgid`. */
  register(pgid: number): ReaperRegistration;
}

interface GroupRecord {
  pgid: number;
  startTime?: string;
  ownerPid: number;
  ownerStartTime?: string;
}

/** Makes a registry that writes one JSON file per group under `dir`. */
export function createReaperRegistry(dir: string): ReaperRegistry {
  Deno.mkdirSync(dir, { recursive: true });
  const ownerStartTime = processStartTimeSync(Deno.pid);
  return {
    register(pgid) {
      const path = join(dir, `${pgid}.json`);
      const record: GroupRecord = {
        pgid,
        startTime: processStartTimeSync(pgid),
        ownerPid: Deno.pid,
        ownerStartTime,
      };
      Deno.writeTextFileSync(path, JSON.stringify(record));
      return {
        release() {
          try {
            Deno.removeSync(path);
          } catch { /* already gone */ }
        },
      };
    },
  };
}

/** What {@linkcode reapLeftoverGroups} did. */
export interface ReapReport {
  /** Groups that had live members and were killed. */
  killed: number[];
  /** Records removed because nothing was left (or the pid was reused). */
  cleared: number[];
}

/**
 * Kills groups recorded by runners that are no longer alive, all at once (each
 * gets its grace period in parallel). Records of a live runner (a `runner
 * serve` sharing the data directory) are left alone.
 */
export async function reapLeftoverGroups(dir: string): Promise<ReapReport> {
  const report: ReapReport = { killed: [], cleared: [] };
  let entries: Deno.DirEntry[];
  try {
    entries = [...Deno.readDirSync(dir)];
  } catch {
    return report;
  }
  const paths = entries.filter((entry) => entry.name.endsWith(".json"))
    .map((entry) => join(dir, entry.name));
  const outcomes = await Promise.all(paths.map(reapRecord));
  for (const outcome of outcomes) {
    if (outcome) report[outcome.kind].push(outcome.pgid);
  }
  return report;
}

/** Reaps the group of one record file; undefined when its owner is alive or the record is unreadable. */
async function reapRecord(
  path: string,
): Promise<{ kind: "killed" | "cleared"; pgid: number } | undefined> {
  let record: GroupRecord;
  try {
    record = JSON.parse(await Deno.readTextFile(path));
  } catch {
    await Deno.remove(path).catch(() => {});
    return undefined;
  }
  if (await ownerAlive(record)) return undefined;
  const leaderStart = await processStartTime(record.pgid);
  const leaderReused = leaderStart !== undefined &&
    record.startTime !== undefined && leaderStart !== record.startTime;
  const members = leaderReused ? [] : await processGroupMembers(record.pgid);
  if (members.length) await killGroup(record.pgid, undefined, 500);
  await Deno.remove(path).catch(() => {});
  return { kind: members.length ? "killed" : "cleared", pgid: record.pgid };
}

async function ownerAlive(record: GroupRecord): Promise<boolean> {
  const start = await processStartTime(record.ownerPid);
  if (start === undefined) return false;
  return record.ownerStartTime === undefined || start === record.ownerStartTime;
}
