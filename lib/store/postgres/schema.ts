/**
 * The PostgreSQL store's schema: its forward migrations, the version table
 * that records how far a database has come, and the migration step every
 * replica runs on start (one at a time, under an advisory lock).
 *
 * @module
 */

import type postgres from "postgres";
import { RunnerError } from "../../errors.ts";
import { transaction } from "./transaction.ts";

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
     updated_at BIGINT NOT NULL,
     PRIMARY KEY (conversation_id, provider, location, target, workspace, agent_command)
   );
   CREATE TABLE runs (
     run_id TEXT PRIMARY KEY,
     position BIGSERIAL,
     conversation_id TEXT,
     status TEXT NOT NULL,
     config_json TEXT NOT NULL,
     code TEXT,
     error TEXT,
     owner_replica TEXT NOT NULL,
     owner_instance TEXT NOT NULL,
     created_at BIGINT NOT NULL,
     updated_at BIGINT NOT NULL,
     finished_at BIGINT
   );
   CREATE INDEX runs_by_conversation ON runs (conversation_id, created_at);
   CREATE INDEX runs_by_status ON runs (status, created_at);
   CREATE TABLE events (
     run_id TEXT NOT NULL,
     sequence INTEGER NOT NULL,
     type TEXT NOT NULL,
     event_json TEXT NOT NULL,
     timestamp BIGINT NOT NULL,
     PRIMARY KEY (run_id, sequence)
   );
   CREATE TABLE replicas (
     replica_id TEXT PRIMARY KEY,
     instance_id TEXT NOT NULL,
     url TEXT NOT NULL,
     started_at TIMESTAMPTZ NOT NULL,
     expires_at TIMESTAMPTZ NOT NULL
   );
   CREATE TABLE conversation_leases (
     conversation_id TEXT PRIMARY KEY,
     replica_id TEXT NOT NULL,
     url TEXT NOT NULL,
     expires_at TIMESTAMPTZ NOT NULL
   );
   CREATE INDEX conversation_leases_by_replica ON conversation_leases (replica_id);
   CREATE TABLE daemons (
     daemon_id TEXT PRIMARY KEY,
     replica_id TEXT NOT NULL,
     instance_id TEXT NOT NULL,
     metadata_json TEXT NOT NULL,
     connected_at BIGINT,
     last_seen_at BIGINT,
     active_jobs_json TEXT NOT NULL
   );
   CREATE TABLE daemon_fences (
     daemon_id TEXT PRIMARY KEY,
     replica_id TEXT NOT NULL,
     fenced_at BIGINT NOT NULL
   );`,
  // The owning process, as in the SQLite store (pid and start time). A fleet
  // tells a dead owner by its replica lease, since replicas run on other
  // hosts; these columns say which process on the owner's host ran the run.
  `ALTER TABLE runs ADD COLUMN owner_pid INTEGER;
   ALTER TABLE runs ADD COLUMN owner_start_time TEXT;`,
  // An index for each listing filter (none, conversation, status, both) in
  // listing order, ties by position, and for pruning the oldest runs.
  `DROP INDEX runs_by_conversation;
   DROP INDEX runs_by_status;
   CREATE INDEX runs_by_created ON runs (created_at, position);
   CREATE INDEX runs_by_conversation ON runs (conversation_id, created_at, position);
   CREATE INDEX runs_by_status ON runs (status, created_at, position);
   CREATE INDEX runs_by_conversation_status
     ON runs (conversation_id, status, created_at, position);`,
  // Fencing: a replica's lease has an epoch, bumped when the lease is
  // declared lost or taken again; a run carries the epoch it was created
  // under, and only that lease, while live, may write the run.
  `ALTER TABLE replicas ADD COLUMN epoch BIGINT NOT NULL DEFAULT 0;
   ALTER TABLE runs ADD COLUMN owner_epoch BIGINT NOT NULL DEFAULT 0;`,
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
export const POSTGRES_SCHEMA_VERSION = MIGRATIONS.length;

/** The advisory lock key replicas take while migrating (any fixed number). */
const MIGRATION_LOCK = 7_301_117;

/**
 * Brings the database to {@linkcode POSTGRES_SCHEMA_VERSION} in one
 * transaction, recording the version in `runner_schema_version`.
 *
 * @throws {RunnerError} `store.schema_too_new` when a newer runner wrote it.
 */
export async function migratePostgres(sql: postgres.Sql): Promise<void> {
  await transaction(sql, async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`;
    await tx`CREATE TABLE IF NOT EXISTS runner_schema_version (
      version INTEGER NOT NULL, migrated_at TIMESTAMPTZ NOT NULL DEFAULT now())`;
    const [row] = await tx`SELECT COALESCE(MAX(version), 0) AS version
      FROM runner_schema_version`;
    const current = Number(row.version);
    if (current > POSTGRES_SCHEMA_VERSION) {
      throw new RunnerError(
        "store.schema_too_new",
        `The PostgreSQL store was written by a newer runner (schema ${current}, this runner knows ${POSTGRES_SCHEMA_VERSION}); upgrade every replica to the same runner version.`,
      );
    }
    for (
      let version = current;
      version < POSTGRES_SCHEMA_VERSION;
      version++
    ) {
      await tx.unsafe(MIGRATIONS[version]);
      await tx`INSERT INTO runner_schema_version (version) VALUES (${
        version + 1
      })`;
    }
  });
}
