/**
 * The reaper against real processes: it kills a group its dead runner left
 * behind, but never a process that merely reuses a recorded pid, and never
 * the agents of a runner that is still alive and shares the data directory.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { reapLeftoverGroups } from "../../lib/agent/reaper.ts";
import { processStartTimeSync } from "../../lib/agent/process_table.ts";
import { isAlive, pathExists, spawnSleeper, tempDir } from "../helpers.ts";

/** The pid of a process that has exited and been reaped. */
async function deadPid(): Promise<number> {
  const child = new Deno.Command("true").spawn();
  await child.status;
  return child.pid;
}

function startTimeOf(pid: number): string {
  const start = processStartTimeSync(pid);
  assert.ok(start, `no start time for ${pid}`);
  return start;
}

interface RecordFields {
  pgid: number;
  startTime: string;
  ownerPid: number;
  ownerStartTime?: string;
}

function writeRecord(dir: string, record: RecordFields): string {
  const path = join(dir, `${record.pgid}.json`);
  Deno.writeTextFileSync(path, JSON.stringify(record));
  return path;
}

async function stop(children: Deno.ChildProcess[]): Promise<void> {
  for (const child of children) {
    try {
      child.kill("SIGKILL");
    } catch { /* already gone */ }
    await child.status;
  }
}

Deno.test("the reaper never kills a process that reused a recorded pid, but kills the recorded group itself", async () => {
  const dir = tempDir();
  const reused = spawnSleeper({ ownGroup: true });
  const leftover = spawnSleeper({ ownGroup: true });
  try {
    const owner = await deadPid();
    // The record's leader started at another time: the pid now belongs to
    // an unrelated process.
    const stale = writeRecord(dir, {
      pgid: reused.pid,
      startTime: `${Number(startTimeOf(reused.pid)) - 1}`,
      ownerPid: owner,
    });
    writeRecord(dir, {
      pgid: leftover.pid,
      startTime: startTimeOf(leftover.pid),
      ownerPid: owner,
    });
    const report = await reapLeftoverGroups(dir);
    assert.equal(isAlive(reused.pid), true, "an unrelated process was killed");
    assert.deepEqual(report.cleared, [reused.pid]);
    assert.equal(pathExists(stale), false, "the stale record stays");
    assert.deepEqual(report.killed, [leftover.pid]);
    assert.equal(isAlive(leftover.pid), false, "the left-over group survived");
  } finally {
    await stop([reused, leftover]);
  }
});

Deno.test("the reaper leaves the agents of a live runner sharing the data dir alone, and reaps them once it is gone", async () => {
  const dir = tempDir();
  const agent = spawnSleeper({ ownGroup: true });
  // A plain sleep stands in for another live runner.
  const otherRunner = spawnSleeper();
  try {
    const record = writeRecord(dir, {
      pgid: agent.pid,
      startTime: startTimeOf(agent.pid),
      ownerPid: otherRunner.pid,
      ownerStartTime: startTimeOf(otherRunner.pid),
    });
    const whileAlive = await reapLeftoverGroups(dir);
    assert.deepEqual(whileAlive, { killed: [], cleared: [] });
    assert.equal(isAlive(agent.pid), true, "a live runner's agent was killed");
    assert.equal(
      pathExists(record),
      true,
      "a live runner's record was removed",
    );

    otherRunner.kill("SIGKILL");
    await otherRunner.status;
    const afterDeath = await reapLeftoverGroups(dir);
    assert.deepEqual(afterDeath, { killed: [agent.pid], cleared: [] });
    assert.equal(isAlive(agent.pid), false);
    assert.equal(pathExists(record), false);
  } finally {
    await stop([agent, otherRunner]);
  }
});
