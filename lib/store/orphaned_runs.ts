/**
 * Ending runs whose owning process is gone: a run the store shows as active
 * while no live process (checked by pid and start time, so zombies and reused
 * pids count as gone) can still finish it. A run whose terminal event was
 * already stored (its final status update was lost, e.g. to a full disk) is
 * finished with that event's outcome; only a run without one gets a
 * `run.failed`, so no run ever holds two terminal events.
 *
 * @module
 */

import type { StatementSync } from "node:sqlite";
import { ERROR_CODES, type ErrorCode } from "../errors.ts";
import { isTerminalEvent, type RunEvent } from "../events.ts";
import type { FinalRunStatus } from "./types.ts";

type Row = Record<string, unknown>;

/** What {@linkcode failOrphanedRuns} works with. */
export interface OrphanedRunsContext {
  /** A cached prepared statement. */
  statement(sql: string): StatementSync;
  /** Whether the row's owner (pid, start time, store instance) is alive. */
  ownerIsAlive(row: Row): boolean;
  /** The failure to record. */
  code: ErrorCode;
  /** The failure message. */
  message: string;
  /** Only this run (default: every active run). */
  runId?: string;
}

/** The outcome a stored terminal event stands for. */
export function outcomeOf(event: RunEvent): {
  status: FinalRunStatus;
  code: string | null;
  error: string | null;
} {
  if (event.type === "run.completed") {
    return { status: "completed", code: null, error: null };
  }
  const code = typeof event.data.code === "string" ? event.data.code : null;
  return {
    status: code === "run.cancelled" ? "cancelled" : "failed",
    code,
    error: typeof event.data.error === "string" ? event.data.error : null,
  };
}

/** The ids of the active runs (or the one run asked for) whose owner is gone. */
export function findOrphanedRuns(context: OrphanedRunsContext): string[] {
  const { statement } = context;
  const columns = "run_id, owner_pid, owner_instance, owner_start_time";
  const rows =
    (context.runId === undefined
      ? statement(`SELECT ${columns} FROM runs WHERE status = 'active'`).all()
      : statement(
        `SELECT ${columns} FROM runs WHERE status = 'active' AND run_id = ?`,
      ).all(context.runId)) as Row[];
  return rows.filter((row) => !context.ownerIsAlive(row))
    .map((row) => String(row.run_id));
}

/**
 * Ends the orphaned active runs (call inside a write transaction); returns
 * their ids.
 */
export function failOrphanedRuns(context: OrphanedRunsContext): string[] {
  const orphaned = findOrphanedRuns(context);
  for (const runId of orphaned) endOrphanedRun(context, runId);
  return orphaned;
}

function endOrphanedRun(context: OrphanedRunsContext, runId: string): void {
  const { statement } = context;
  const now = Date.now();
  const last = statement(
    "SELECT event_json FROM events WHERE run_id = ? ORDER BY sequence DESC LIMIT 1",
  ).get(runId) as Row | undefined;
  const lastEvent = last
    ? JSON.parse(String(last.event_json)) as RunEvent
    : undefined;
  const finish = statement(
    `UPDATE runs SET status = ?, code = ?, error = ?, updated_at = ?, finished_at = ?
     WHERE run_id = ?`,
  );
  if (lastEvent && isTerminalEvent(lastEvent)) {
    const outcome = outcomeOf(lastEvent);
    finish.run(outcome.status, outcome.code, outcome.error, now, now, runId);
    return;
  }
  const { code, message } = context;
  finish.run("failed", code, message, now, now, runId);
  const sequence = (lastEvent?.sequence ?? 0) + 1;
  const event: RunEvent = {
    run_id: runId,
    type: "run.failed",
    data: { error: message, code, retryable: ERROR_CODES[code].retryable },
    sequence,
    timestamp: now,
  };
  statement(
    `INSERT INTO events (run_id, sequence, type, event_json, timestamp)
     VALUES (?, ?, ?, ?, ?)`,
  ).run(runId, sequence, event.type, JSON.stringify(event), now);
}
