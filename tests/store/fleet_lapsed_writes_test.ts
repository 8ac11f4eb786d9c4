/**
 * Fencing under a lease that lapsed but was not swept yet (a replica stalled
 * past its lease, the sweep not run): every write that needs the live lease
 * is refused — the conversation's remembered session values, the run's
 * events, the run's end — and what the live fleet reads is what the replica
 * wrote while its lease was live.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { RunnerError } from "../../lib/errors.ts";
import { clusterForThisFile, openReplicaStore } from "../pg_helpers.ts";
import { localSessionKey } from "../store_suite.ts";

const cluster = clusterForThisFile();

const KEY = localSessionKey("conv-lapsed", "/ws");

function delta(runId: string, sequence: number, text: string) {
  return {
    run_id: runId,
    type: "message.delta",
    sequence,
    timestamp: Date.now(),
    data: { delta: text },
  };
}

Deno.test({
  name:
    "[postgres] a replica whose lease lapsed, not yet swept, writes no remembered session values, no events and no run end",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const url = await cluster().newDatabase();
    const stalled = await openReplicaStore(url, "stalled");
    const live = await openReplicaStore(url, "live");
    const sql = postgres(url, { onnotice: () => {} });
    try {
      const runId = "run-lapsed-1";
      await stalled.createRun({
        runId,
        conversationId: KEY.conversationId,
        config: {},
        status: "active",
      });
      await stalled.putSession(KEY, "session-1");
      await stalled.putSessionSettings(KEY, { mode: "plan" });
      stalled.appendEvent(runId, delta(runId, 1, "while live"));
      await stalled.flush();
      // It stalls: no renewal, and its lease has just expired; no sweep ran.
      await (stalled.fleet as unknown as {
        stop(release: boolean): Promise<void>;
      }).stop(false);
      await sql`UPDATE replicas SET expires_at = clock_timestamp() - interval '1 second'
        WHERE replica_id = 'stalled'`;
      await stalled.putSessionSettings(KEY, { mode: "yolo" });
      stalled.appendEvent(runId, delta(runId, 2, "after the lapse"));
      await stalled.flush().catch(() => {});
      await assert.rejects(
        () => stalled.finishRun(runId, { status: "completed" }),
        (error) =>
          error instanceof RunnerError && error.code === "runner.replica_lost",
      );
      // What the fleet reads: the values and events of the live lease only.
      const session = await live.getSession(KEY);
      assert.equal(session?.sessionId, "session-1");
      assert.deepEqual(session?.settings, { mode: "plan" });
      assert.deepEqual(
        (await live.getEvents(runId)).map((e) => e.data.delta),
        ["while live"],
      );
      assert.equal((await live.getRun(runId))?.status, "active");
    } finally {
      await sql.end();
      await live.close();
      await stalled.close();
    }
  },
});

Deno.test({
  name:
    "[postgres] a run's end written while its replica's lease is lost is rolled back: the run does not read as completed, the write fails as runner.replica_lost",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const url = await cluster().newDatabase();
    // A short lease: the replica renews it every second and so notices soon.
    const stalled = await openReplicaStore(url, "stalled", { leaseMs: 3_000 });
    const sql = postgres(url, { onnotice: () => {} });
    const blocker = await sql.reserve();
    try {
      const runId = "run-lapsed-mid-write";
      await stalled.createRun({
        runId,
        conversationId: KEY.conversationId,
        config: {},
        status: "active",
      });
      // Another transaction holds the run's row: the end's write waits on it
      // after the fencing check passed, under a lease still live.
      await blocker`BEGIN`;
      await blocker`SELECT 1 FROM runs WHERE run_id = ${runId} FOR UPDATE`;
      const finishing = stalled.finishRun(runId, { status: "completed" })
        .then(() => "finished", (error) => error);
      await waitForBlockedWrite(sql);
      // Meanwhile the lease lapses and the replica declares it lost.
      const lost = new Promise<void>((resolve) =>
        stalled.fleet!.onLeaseLost(resolve)
      );
      await sql`UPDATE replicas SET expires_at = clock_timestamp() - interval '1 second'
        WHERE replica_id = 'stalled'`;
      await lost;
      await blocker`ROLLBACK`;
      const outcome = await finishing;
      assert.ok(
        outcome instanceof RunnerError &&
          outcome.code === "runner.replica_lost",
        `the end was written: ${outcome}`,
      );
      const [run] = await sql`SELECT status FROM runs WHERE run_id = ${runId}`;
      assert.notEqual(run.status, "completed");
    } finally {
      blocker.release();
      await sql.end();
      await stalled.close();
    }
  },
});

Deno.test({
  name:
    "[postgres] a replica whose id another process took writes nothing more: its run's end fails as runner.replica_lost, its events are not stored",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const url = await cluster().newDatabase();
    const stalled = await openReplicaStore(url, "same", { leaseMs: 3_000 });
    const sql = postgres(url, { onnotice: () => {} });
    let successor: Awaited<ReturnType<typeof openReplicaStore>> | undefined;
    try {
      const runId = "run-identity-taken";
      await stalled.createRun({
        runId,
        conversationId: KEY.conversationId,
        config: {},
        status: "active",
      });
      const gone = new Promise<void>((resolve) =>
        stalled.fleet!.onIdentityLost(resolve)
      );
      // Its lease lapses and another process takes the id: the stalled one
      // cannot join again, so it holds no lease to write under at all.
      await sql`UPDATE replicas SET expires_at = clock_timestamp() - interval '1 second'
        WHERE replica_id = 'same'`;
      successor = await openReplicaStore(url, "same");
      await gone;
      stalled.appendEvent(runId, delta(runId, 1, "after the id was taken"));
      await stalled.flush().catch(() => {});
      await assert.rejects(
        () => stalled.finishRun(runId, { status: "completed" }),
        (error) =>
          error instanceof RunnerError && error.code === "runner.replica_lost",
      );
      assert.deepEqual(await successor.getEvents(runId), []);
      assert.equal((await successor.getRun(runId))?.status, "active");
    } finally {
      await sql.end();
      await successor?.close();
      await stalled.close();
    }
  },
});

/** Resolves once a statement of another connection waits for a row lock. */
async function waitForBlockedWrite(sql: postgres.Sql): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const [row] = await sql`SELECT count(*)::int AS waiting FROM pg_locks
      WHERE NOT granted`;
    if (row.waiting > 0) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error("no write waited for the row lock within a minute");
}
