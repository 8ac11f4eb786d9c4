/**
 * Fills a run store file with many finished runs at once, written directly
 * as rows in one transaction (a recursive `INSERT … SELECT`, no runner
 * code): the bench's and the query-plan test's large stores.
 *
 * @module
 */

import { DatabaseSync } from "node:sqlite";

/** What {@linkcode insertRunRows} writes. */
export interface BulkRunsOptions {
  /** The SQLite file (already migrated: open and close a store on it first). */
  path: string;
  /** How many runs. */
  count: number;
  /** Over how many conversations they spread (default 500). */
  conversations?: number;
  /** The first run's `created_at`, ms since the epoch; each next one is 1 ms later (default: `count` ms ago). */
  createdFrom?: number;
  /** Every so many runs one is `active` (default: none). */
  activeEvery?: number;
}

const CONFIG = JSON.stringify({
  provider: "codex",
  workspace: "/srv/work",
  location: "local",
  timeout: 600,
  "late-update-ms": 150,
});

/** Inserts `count` runs `bulk-0000000`… (1 in 100 failed, the rest completed, some active if asked). */
export function insertRunRows(options: BulkRunsOptions): void {
  const db = new DatabaseSync(options.path);
  try {
    db.exec("PRAGMA busy_timeout = 5000");
    db.exec("PRAGMA cache_size = -65536");
    db.exec("BEGIN IMMEDIATE");
    db.prepare(
      `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ? - 1)
       INSERT INTO runs (run_id, conversation_id, status, config_json, created_at,
         updated_at, finished_at)
       SELECT printf('bulk-%07d', i), 'conv-' || (i % ?),
         CASE WHEN ? > 0 AND i % ? = 0 THEN 'active'
           WHEN i % 100 = 99 THEN 'failed' ELSE 'completed' END,
         ?, ? + i, ? + i, CASE WHEN ? > 0 AND i % ? = 0 THEN NULL ELSE ? + i END
       FROM n`,
    ).run(
      options.count,
      options.conversations ?? 500,
      options.activeEvery ?? 0,
      options.activeEvery ?? 1,
      CONFIG,
      options.createdFrom ?? Date.now() - options.count,
      options.createdFrom ?? Date.now() - options.count,
      options.activeEvery ?? 0,
      options.activeEvery ?? 1,
      options.createdFrom ?? Date.now() - options.count,
    );
    db.exec("COMMIT");
  } finally {
    db.close();
  }
}

/** Gives run `runId` (already stored) `count` events: deltas, then `run.completed`. */
export function insertEventRows(
  options: { path: string; runId: string; count: number },
): void {
  const db = new DatabaseSync(options.path);
  try {
    db.exec("PRAGMA busy_timeout = 5000");
    const insert = db.prepare(
      "INSERT INTO events (run_id, sequence, type, event_json, timestamp) VALUES (?, ?, ?, ?, ?)",
    );
    db.exec("BEGIN IMMEDIATE");
    for (let sequence = 1; sequence <= options.count; sequence++) {
      const type = sequence === options.count
        ? "run.completed"
        : "message.delta";
      const data = type === "run.completed"
        ? { finish_reason: "stop" }
        : { delta: { content: `chunk ${sequence} `.repeat(4) } };
      const event = {
        type,
        run_id: options.runId,
        sequence,
        timestamp: new Date().toISOString(),
        data,
      };
      insert.run(
        options.runId,
        sequence,
        type,
        JSON.stringify(event),
        Date.now(),
      );
    }
    db.exec("COMMIT");
  } finally {
    db.close();
  }
}
