/**
 * Ending the runs of lost replicas in the PostgreSQL store: an active run
 * whose owning replica lease (instance and epoch) is not live (the replica
 * died, was paused or cut off past its lease, or restarted as a new
 * instance) is ended exactly once, after that lease is fenced, however
 * many replicas sweep at the same moment (rows are locked and skipped). As
 * in the SQLite store, a run whose terminal event was already stored is
 * finished with that event's outcome; only a run without one gets a
 * `run.failed`, so no run ever holds two terminal events.
 *
 * @module
 */

import type postgres from "postgres";
import { ERROR_CODES, type ErrorCode } from "../../errors.ts";
import { isTerminalEvent, type RunEvent } from "../../events.ts";
import { outcomeOf } from "../orphaned_runs.ts";
import { transaction } from "./transaction.ts";

/** What {@linkcode failLostReplicaRuns} ends. */
export interface LostReplicaRunsOptions {
  /** The failure to record. */
  code: ErrorCode;
  /** The failure message. */
  message: string;
  /** Only this run (default: every active run). */
  runId?: string;
}

/** Ends every active run (or the one asked for) of a lost replica; resolves to their ids. */
export function failLostReplicaRuns(
  sql: postgres.Sql,
  options: LostReplicaRunsOptions,
): Promise<string[]> {
  return transaction(sql, async (tx) => {
    const only = options.runId === undefined
      ? tx``
      : tx`AND r.run_id = ${options.runId}`;
    await invalidateLapsedLeases(tx, only);
    const rows = await tx`SELECT r.run_id FROM runs r WHERE r.status = 'active'
      ${only} AND NOT EXISTS (SELECT 1 FROM replicas p
        WHERE p.replica_id = r.owner_replica AND p.instance_id = r.owner_instance
        AND p.epoch = r.owner_epoch AND p.expires_at > clock_timestamp())
      FOR UPDATE OF r SKIP LOCKED`;
    const ended: string[] = [];
    for (const row of rows) {
      const runId = String(row.run_id);
      await endLostRun(tx, runId, options);
      ended.push(runId);
    }
    return ended;
  });
}

/**
 * Fences the lapsed leases whose runs are about to be ended: bumps their
 * epoch, so the lease can never be renewed, after waiting for the writes
 * that hold it (they lock it `FOR KEY SHARE`); those writes are then
 * visible to the rest of the sweep, and none can follow.
 */
async function invalidateLapsedLeases(
  tx: postgres.TransactionSql,
  only: postgres.PendingQuery<postgres.Row[]>,
): Promise<void> {
  const lapsed = await tx`SELECT p.replica_id FROM replicas p
    WHERE p.expires_at <= clock_timestamp() AND EXISTS (SELECT 1 FROM runs r
      WHERE r.status = 'active' AND r.owner_replica = p.replica_id
      AND r.owner_instance = p.instance_id AND r.owner_epoch = p.epoch ${only})
    FOR UPDATE OF p`;
  if (!lapsed.length) return;
  await tx`UPDATE replicas SET epoch = epoch + 1 WHERE replica_id = ANY(${
    lapsed.map((row) => String(row.replica_id))
  }::text[]) AND expires_at <= clock_timestamp()`;
}

async function endLostRun(
  tx: postgres.TransactionSql,
  runId: string,
  { code, message }: LostReplicaRunsOptions,
): Promise<void> {
  const now = Date.now();
  const [last] = await tx`SELECT event_json FROM events
    WHERE run_id = ${runId} ORDER BY sequence DESC LIMIT 1`;
  const lastEvent = last
    ? JSON.parse(String(last.event_json)) as RunEvent
    : undefined;
  const outcome = lastEvent && isTerminalEvent(lastEvent)
    ? outcomeOf(lastEvent)
    : { status: "failed", code, error: message };
  await tx`UPDATE runs SET status = ${outcome.status}, code = ${outcome.code},
    error = ${outcome.error}, updated_at = ${now}, finished_at = ${now}
    WHERE run_id = ${runId}`;
  if (lastEvent && isTerminalEvent(lastEvent)) return;
  const event: RunEvent = {
    run_id: runId,
    type: "run.failed",
    data: { error: message, code, retryable: ERROR_CODES[code].retryable },
    sequence: (lastEvent?.sequence ?? 0) + 1,
    timestamp: now,
  };
  await tx`INSERT INTO events (run_id, sequence, type, event_json, timestamp)
    VALUES (${runId}, ${event.sequence!}, ${event.type},
      ${JSON.stringify(event)}, ${now})`;
}
