/**
 * Process groups: signal one, end one for good (SIGTERM, then SIGKILL, then
 * wait until the process table shows no member), or confirm that a run's
 * groups are gone. See `docs/teardown.md`.
 *
 * @module
 */

import { processGroupMembers } from "./process_table.ts";
import { delay, settleWithin } from "../timing.ts";

/**
 * Signals a whole process group, ignoring groups that are already gone. A
 * `pgid` that names no agent's group (not a whole number above 1) signals
 * nothing: `kill(0)` would reach the runner's own group, `kill(-1)` every
 * process it may signal, and a negative one a single process.
 */
export function signalGroup(pgid: number, signal: Deno.Signal): void {
  if (!Number.isSafeInteger(pgid) || pgid <= 1) return;
  try {
    Deno.kill(-pgid, signal);
  } catch {
    // ESRCH: nothing left in the group.
  }
}

/**
 * SIGTERM to the group, SIGKILL after `graceMs`, then wait (bounded) until the
 * process table shows no live member of the group.
 */
export async function killGroup(
  pgid: number,
  leaderExited: Promise<unknown> | undefined,
  graceMs: number,
): Promise<void> {
  signalGroup(pgid, "SIGTERM");
  const deadline = Date.now() + graceMs;
  if (leaderExited) {
    await settleWithin(leaderExited, graceMs);
  }
  while (Date.now() < deadline && (await processGroupMembers(pgid)).length) {
    await delay(25);
  }
  if ((await processGroupMembers(pgid)).length) {
    signalGroup(pgid, "SIGKILL");
  }
  // After SIGKILL the kernel removes the members promptly; wait for it so the
  // caller can rely on "no process left".
  for (let i = 0; i < 200; i++) {
    if (!(await processGroupMembers(pgid)).length) break;
    signalGroup(pgid, "SIGKILL");
    await delay(10);
  }
  if (leaderExited) await leaderExited;
}

/** Options for {@linkcode confirmGroupsGone}. */
export interface ConfirmGroupsOptions {
  /** SIGTERM→SIGKILL grace for a group that still has members, in ms. */
  graceMs: number;
  /** Structured log. */
  log: (entry: Record<string, unknown>) => void;
  /** Receives each group that outlived SIGKILL. */
  survived?: (pgid: number) => void;
}

/**
 * Whether no member of any of `groups` is alive, after killing stragglers
 * once more (e.g. an agent spawned while its launch was being cancelled).
 */
export async function confirmGroupsGone(
  groups: Iterable<number>,
  options: ConfirmGroupsOptions,
): Promise<boolean> {
  let confirmed = true;
  for (const pgid of groups) {
    if (!(await processGroupMembers(pgid)).length) continue;
    options.log({ msg: "agent group still alive after teardown", pgid });
    await killGroup(pgid, undefined, options.graceMs);
    const left = await processGroupMembers(pgid);
    if (left.length) {
      options.log({ msg: "agent group survived SIGKILL", pgid, pids: left });
      options.survived?.(pgid);
      confirmed = false;
    }
  }
  return confirmed;
}
