/**
 * The recorder on a fencing store (a fleet replica's PostgreSQL store): the
 * terminal event reaches listeners only once the store took the run's end;
 * a run whose replica lost its lease ends for its listeners with one
 * `runner.replica_lost` failure, numbered after what they saw, and nothing
 * the agent does later reaches them.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { ERROR_CODES } from "../../lib/errors.ts";
import type { RunEvent } from "../../lib/events.ts";
import { createRunRecorder } from "../../lib/run/recording.ts";
import type { RunStore } from "../../lib/store/types.ts";
import { clusterForThisFile, openReplicaStore } from "../pg_helpers.ts";

const cluster = clusterForThisFile();

function runEvent(
  runId: string,
  sequence: number,
  type: string,
  data: Record<string, unknown> = {},
): RunEvent {
  return { run_id: runId, type, sequence, timestamp: Date.now(), data };
}

/** A run of `store` and its recorder; `seen` is what its listener got. */
async function recordedRun(store: RunStore, runId: string) {
  await store.createRun({ runId, config: {}, status: "active" });
  const recorder = createRunRecorder({
    store,
    runId,
    secrets: [],
    log: () => {},
  });
  const seen: RunEvent[] = [];
  const statusesSeen: Promise<string | undefined>[] = [];
  let failedSeen: () => void = () => {};
  const failed = new Promise<void>((resolve) => failedSeen = resolve);
  recorder.subscribe((event) => {
    seen.push(event);
    if (event.type === "run.failed") failedSeen();
    // What the store says about the run when its terminal event arrives.
    if (event.type === "run.completed") {
      statusesSeen.push(store.getRun(runId).then((run) => run?.status));
    }
  });
  recorder.stopReplay();
  return { recorder, seen, statusesSeen, failed };
}

/** The one `runner.replica_lost` failure a listener sees. */
function assertLost(event: RunEvent, sequence: number): void {
  assert.equal(event.type, "run.failed");
  assert.equal(event.sequence, sequence);
  assert.equal(event.data.code, "runner.replica_lost");
  assert.equal(
    event.data.retryable,
    ERROR_CODES["runner.replica_lost"].retryable,
  );
  assert.match(String(event.data.error), /lost its fleet lease/);
  assert.match(String(event.data.error), /start it again/);
  assert.equal(typeof event.timestamp, "number");
}

Deno.test({
  name:
    "[postgres] under a live lease the terminal event follows every event, and arrives once the run's end is stored",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const url = await cluster().newDatabase();
    const store = await openReplicaStore(url, "live");
    try {
      const runId = "run-fleet-live";
      const { recorder, seen, statusesSeen } = await recordedRun(store, runId);
      recorder.emit(runEvent(runId, 1, "message.delta", { delta: "a" }));
      recorder.emit(runEvent(runId, 2, "run.completed"));
      await recorder.settled();
      assert.deepEqual(seen.map((event) => event.type), [
        "message.delta",
        "run.completed",
      ]);
      assert.deepEqual(seen, await store.getEvents(runId));
      assert.equal((await store.getRun(runId))?.status, "completed");
      assert.deepEqual(await Promise.all(statusesSeen), ["completed"]);
    } finally {
      await store.close();
    }
  },
});

Deno.test({
  name:
    "[postgres] a replica that loses its lease mid-run ends the run for its listeners with one runner.replica_lost failure; the agent's later events never reach them",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const url = await cluster().newDatabase();
    // A short lease: renewed every second, so its loss is noticed soon.
    const store = await openReplicaStore(url, "losing", { leaseMs: 3_000 });
    const sql = postgres(url, { onnotice: () => {} });
    try {
      const runId = "run-fleet-lost";
      const { recorder, seen, failed } = await recordedRun(store, runId);
      recorder.emit(runEvent(runId, 1, "message.delta", { delta: "a" }));
      await recorder.settled();
      await sql`UPDATE replicas SET expires_at = clock_timestamp() - interval '1 second'
        WHERE replica_id = 'losing'`;
      await failed;
      recorder.emit(runEvent(runId, 2, "message.delta", { delta: "late" }));
      recorder.emit(runEvent(runId, 3, "run.completed"));
      await recorder.settled();
      assert.equal(seen.length, 2, JSON.stringify(seen));
      assert.equal(seen[0].data.delta, "a");
      assertLost(seen[1], 2);
    } finally {
      await sql.end();
      await store.close();
    }
  },
});

Deno.test({
  name:
    "[postgres] a terminal event the store fenced (a lapsed lease, not yet swept) reaches listeners as runner.replica_lost in its place",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const url = await cluster().newDatabase();
    const store = await openReplicaStore(url, "stalled");
    const sql = postgres(url, { onnotice: () => {} });
    try {
      const runId = "run-fleet-fenced";
      const { recorder, seen } = await recordedRun(store, runId);
      recorder.emit(runEvent(runId, 1, "message.delta", { delta: "a" }));
      await recorder.settled();
      // It stalls: no renewal, and its lease has just expired; no sweep ran.
      await (store.fleet as unknown as {
        stop(release: boolean): Promise<void>;
      }).stop(false);
      await sql`UPDATE replicas SET expires_at = clock_timestamp() - interval '1 second'
        WHERE replica_id = 'stalled'`;
      recorder.emit(runEvent(runId, 5, "run.completed"));
      await recorder.settled();
      assert.equal(seen.length, 2, JSON.stringify(seen));
      assertLost(seen[1], 5);
      const [run] = await sql`SELECT status FROM runs WHERE run_id = ${runId}`;
      assert.equal(
        run.status,
        "active",
        "the fleet's to end, not this replica's",
      );
    } finally {
      await sql.end();
      await store.close();
    }
  },
});

Deno.test({
  name:
    "[postgres] a lost lease ends the run for its listeners at once, also while its events cannot be written",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const url = await cluster().newDatabase();
    const store = await openReplicaStore(url, "blocked", { leaseMs: 3_000 });
    const sql = postgres(url, { onnotice: () => {} });
    const blocker = await sql.reserve();
    try {
      const runId = "run-fleet-blocked";
      const { recorder, seen, failed } = await recordedRun(store, runId);
      recorder.emit(runEvent(runId, 1, "message.delta", { delta: "a" }));
      await recorder.settled();
      // Another transaction holds the events table: the next write waits.
      await blocker`BEGIN`;
      await blocker`LOCK TABLE events IN EXCLUSIVE MODE`;
      recorder.emit(runEvent(runId, 2, "message.delta", { delta: "b" }));
      await waitForBlockedWrite(sql);
      await sql`UPDATE replicas SET expires_at = clock_timestamp() - interval '1 second'
        WHERE replica_id = 'blocked'`;
      await failed;
      assert.equal(seen.length, 2, JSON.stringify(seen));
      assertLost(seen[1], 2);
      await blocker`ROLLBACK`;
      await recorder.settled();
      assert.equal(seen.length, 2, JSON.stringify(seen));
    } finally {
      blocker.release();
      await sql.end();
      await store.close();
    }
  },
});

/** Resolves once a statement of another connection waits for a lock. */
async function waitForBlockedWrite(sql: postgres.Sql): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const [row] = await sql`SELECT count(*)::int AS waiting FROM pg_locks
      WHERE NOT granted`;
    if (row.waiting > 0) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error("no write waited for the lock within a minute");
}
