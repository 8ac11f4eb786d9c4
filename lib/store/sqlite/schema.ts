/**
 * The run store's SQLite schema: its forward migrations, the version this
 * code writes, and the migration step run when the store is opened.
 *
 * @module
 */

import type { DatabaseSync } from "node:sqlite";
import { RunnerError } from "../../errors.ts";

/** Forward migrations; entry `i` moves the schema from version `i` to `i + 1`. */
const MIGRATIONS: readonly string[] = [
  `CREATE TABLE sessions (
     conversation_id TEXT NOT NULL,
     provider TEXT NOT NULL,
     location TEXT NOT NULL,
     target TEXT NOT NULL,
     workspace TEXT NOT NULL,
     agent_command TEXT NOT NULL,
     session_id TEXT NOT NULL,
     updated_at INTEGER NOT NULL,
     PRIMARY KEY (conversation_id, provider, location, target, workspace, agent_command)
   ) WITHOUT ROWID;
   CREATE TABLE runs (
     run_id TEXT PRIMARY KEY,
     conversation_id TEXT,
     status TEXT NOT NULL,
     config_json TEXT NOT NULL,
     code TEXT,
     error TEXT,
     owner_pid INTEGER,
     owner_instance TEXT,
     created_at INTEGER NOT NULL,
     updated_at INTEGER NOT NULL,
     finished_at INTEGER
   );
   CREATE INDEX runs_by_conversation ON runs (conversation_id, created_at);
   CREATE INDEX runs_by_status ON runs (status, created_at);
   CREATE TABLE events (
     run_id TEXT NOT NULL,
     sequence INTEGER NOT NULL,
     type TEXT NOT NULL,
     event_json TEXT NOT NULL,
     timestamp INTEGER NOT NULL,
     PRIMARY KEY (run_id, sequence)
   ) WITHOUT ROWID;`,
  // The owner's start time tells a live owner from a zombie or a reused pid.
  `ALTER TABLE runs ADD COLUMN owner_start_time TEXT;`,
  // An index for each listing filter (none, conversation, status, both) in
  // listing order, and for pruning the oldest runs.
  `CREATE INDEX runs_by_created ON runs (created_at);
   CREATE INDEX runs_by_conversation_status ON runs (conversation_id, status, created_at);`,
  // The start of the first prompt, for listings (the console's runs list).
  `ALTER TABLE runs ADD COLUMN prompt TEXT;`,
  // The session config values a conversation remembers with its session.
  `ALTER TABLE sessions ADD COLUMN settings_json TEXT;`,
  // What the agent reported of a run's usage (the terminal event's `usage`).
  `ALTER TABLE runs ADD COLUMN usage_json TEXT;`,
  // A session's running cost as the agent last reported it, with its id.
  `ALTER TABLE sessions ADD COLUMN cost_json TEXT;`,
];

/** The schema version this code writes. */
export const SCHEMA_VERSION = MIGRATIONS.length;

/**
 * Brings the database to {@linkcode SCHEMA_VERSION} in one transaction.
 *
 * @throws {RunnerError} `store.schema_too_new` when a newer runner wrote it.
 */
export function migrateSchema(db: DatabaseSync, path: string): void {
  inTransaction(db, () => {
    const row = db.prepare("PRAGMA user_version").get() as {
      user_version: unknown;
    };
    const current = Number(row.user_version);
    if (current > SCHEMA_VERSION) {
      throw new RunnerError(
        "store.schema_too_new",
        `The store at ${path} was written by a newer runner (schema ${current}, this runner knows ${SCHEMA_VERSION}); upgrade the runner or point RUNNER_DATA_DIR elsewhere.`,
      );
    }
    for (let version = current; version < SCHEMA_VERSION; version++) {
      db.exec(MIGRATIONS[version]);
    }
    if (current !== SCHEMA_VERSION) {
      db.exec(`PRAGMA user_version = ${SCHEMA_VERSION}`);
    }
  });
}

/** Runs `body` in a write transaction taken up front, so concurrent writers wait instead of failing mid-way. */
export function inTransaction<T>(db: DatabaseSync, body: () => T): T {
  db.exec("BEGIN IMMEDIATE");
  try {
    const result = body();
    db.exec("COMMIT");
    return result;
  } catch (error) {
    if (db.isTransaction) db.exec("ROLLBACK");
    throw error;
  }
}
