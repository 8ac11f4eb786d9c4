/**
 * The embedded {@linkcode RunStore}: one SQLite file (`node:sqlite`) in WAL
 * mode, shared safely by several runner processes on one machine. Event
 * writes go through `store_event_queue.ts` and are flushed in one transaction
 * shortly after, so the streaming path does not pay for a commit per chunk.
 *
 * @module
 */

import { dirname } from "node:path";
import process from "node:process";
import { DatabaseSync, type StatementSync } from "node:sqlite";
import { ERROR_CODES, type ErrorCode, RunnerError } from "../errors.ts";
import type { RunEvent } from "../events.ts";
import { EventQueue, type QueuedEvent } from "./event_queue.ts";
import { inTransaction, migrateSchema } from "./schema.ts";
import type {
  GetEventsOptions,
  ListRunsOptions,
  NewRun,
  OpenStoreOptions,
  RunOutcome,
  RunRecord,
  RunStatus,
  SessionKey,
  SessionRecord,
  StoredSession,
  SyncRunStore,
} from "./types.ts";

/** Options for {@linkcode openSqliteStore}. */
export interface OpenSqliteStoreOptions
  extends Omit<OpenStoreOptions, "dataDir"> {
  /** The database file; its directory is created when missing. */
  path: string;
}

/** Store instances open in this process, so their active runs are never taken for a crashed process's. */
const openInstances = new Set<string>();

type Row = Record<string, unknown>;

/**
 * Opens the SQLite store at `options.path`, creating the directory and file
 * and running pending migrations.
 *
 * @throws {RunnerError} `store.unavailable` or `store.schema_too_new`.
 */
export function openSqliteStore(
  options: OpenSqliteStoreOptions,
): SyncRunStore {
  let db: DatabaseSync;
  try {
    Deno.mkdirSync(dirname(options.path), { recursive: true });
    db = new DatabaseSync(options.path);
  } catch (error) {
    throw unavailable(`open the store at ${options.path}`, error);
  }
  try {
    // busy_timeout first, so the WAL switch and migrations wait for another process.
    db.exec("PRAGMA busy_timeout = 5000");
    db.exec("PRAGMA journal_mode = WAL");
    db.exec("PRAGMA synchronous = NORMAL");
    migrateSchema(db, options.path);
    return new SqliteRunStore(db, options);
  } catch (error) {
    db.close();
    if (error instanceof RunnerError) throw error;
    throw unavailable(`open the store at ${options.path}`, error);
  }
}

function unavailable(action: string, error: unknown): RunnerError {
  const reason = error instanceof Error ? error.message : String(error);
  const hint = error instanceof Deno.errors.NotCapable
    ? "grant --allow-read and --allow-write for the data directory"
    : "check that the data directory (RUNNER_DATA_DIR) is writable and the disk is not full";
  return new RunnerError(
    "store.unavailable",
    `Could not ${action}: ${reason}; ${hint}.`,
    {
      cause: error,
    },
  );
}

/** Whether `pid` is a live process, by sending it signal 0. */
function probeProcess(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as { code?: string }).code === "EPERM";
  }
}

class SqliteRunStore implements SyncRunStore {
  readonly #db: DatabaseSync;
  readonly #instanceId = crypto.randomUUID();
  readonly #isProcessAlive: (pid: number) => boolean;
  readonly #statements: Record<string, StatementSync> = {};
  readonly #queue: EventQueue;
  readonly #lastSequence = new Map<string, number>();
  #closed = false;

  constructor(db: DatabaseSync, options: OpenSqliteStoreOptions) {
    this.#db = db;
    this.#isProcessAlive = options.isProcessAlive ?? probeProcess;
    this.#queue = new EventQueue({
      write: (batch) => this.#writeEvents(batch),
      onFlushError: options.onFlushError ??
        ((error) =>
          console.error(`runner store [${error.code}]: ${error.message}`)),
    });
    openInstances.add(this.#instanceId);
  }

  #statement(sql: string): StatementSync {
    this.#assertOpen();
    return this.#statements[sql] ??= this.#db.prepare(sql);
  }

  #assertOpen(): void {
    if (this.#closed) {
      throw new RunnerError(
        "runner.internal",
        "Internal error: the run store is already closed.",
      );
    }
  }

  #write<T>(action: string, body: () => T): T {
    this.#assertOpen();
    try {
      return body();
    } catch (error) {
      if (error instanceof RunnerError) throw error;
      throw unavailable(action, error);
    }
  }

  getSession(key: SessionKey): StoredSession | undefined {
    const row = this.#statement(
      `SELECT session_id, updated_at FROM sessions WHERE conversation_id = ? AND provider = ?
         AND location = ? AND target = ? AND workspace = ? AND agent_command = ?`,
    ).get(...sessionKeyValues(key)) as Row | undefined;
    if (row === undefined) return undefined;
    return {
      sessionId: String(row.session_id),
      updatedAt: Number(row.updated_at),
    };
  }

  putSession(key: SessionKey, sessionId: string): void {
    this.#write("store the session id", () => {
      this.#statement(
        `INSERT INTO sessions (conversation_id, provider, location, target, workspace,
           agent_command, session_id, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT DO UPDATE SET session_id = excluded.session_id, updated_at = excluded.updated_at`,
      ).run(...sessionKeyValues(key), sessionId, Date.now());
    });
  }

  deleteSessions(conversationId: string): number {
    return this.#write("delete the sessions", () => {
      const result = this.#statement(
        "DELETE FROM sessions WHERE conversation_id = ?",
      )
        .run(conversationId);
      return Number(result.changes);
    });
  }

  listSessions(conversationId: string): SessionRecord[] {
    const rows = this.#statement(
      "SELECT * FROM sessions WHERE conversation_id = ? ORDER BY updated_at DESC",
    ).all(conversationId) as Row[];
    return rows.map((row) => ({
      conversationId: String(row.conversation_id),
      provider: String(row.provider),
      location: String(row.location),
      target: String(row.target),
      workspace: String(row.workspace),
      agentCommand: String(row.agent_command),
      sessionId: String(row.session_id),
      updatedAt: Number(row.updated_at),
    }));
  }

  createRun(run: NewRun): void {
    this.#write("record the run", () => {
      const now = Date.now();
      this.#statement(
        `INSERT INTO runs (run_id, conversation_id, status, config_json, owner_pid,
           owner_instance, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      ).run(
        run.runId,
        run.conversationId ?? null,
        run.status,
        JSON.stringify(run.config),
        Deno.pid,
        this.#instanceId,
        now,
        now,
      );
    });
  }

  finishRun(runId: string, outcome: RunOutcome): boolean {
    this.flush();
    this.#lastSequence.delete(runId);
    return this.#write("record the run's end", () => {
      const now = Date.now();
      const result = this.#statement(
        `UPDATE runs SET status = ?, code = ?, error = ?, updated_at = ?, finished_at = ?
         WHERE run_id = ? AND status = 'active'`,
      ).run(
        outcome.status,
        outcome.code ?? null,
        outcome.error ?? null,
        now,
        now,
        runId,
      );
      return Number(result.changes) === 1;
    });
  }

  getRun(runId: string): RunRecord | undefined {
    const row = this.#statement("SELECT * FROM runs WHERE run_id = ?").get(
      runId,
    ) as
      | Row
      | undefined;
    return row === undefined ? undefined : toRunRecord(row);
  }

  listRuns(options: ListRunsOptions): RunRecord[] {
    const conditions: string[] = [];
    const values: (string | number)[] = [];
    if (options.conversationId !== undefined) {
      conditions.push("conversation_id = ?");
      values.push(options.conversationId);
    }
    if (options.status !== undefined) {
      conditions.push("status = ?");
      values.push(options.status);
    }
    const where = conditions.length > 0
      ? `WHERE ${conditions.join(" AND ")}`
      : "";
    const rows = this.#statement(
      `SELECT * FROM runs ${where} ORDER BY created_at DESC, rowid DESC LIMIT ?`,
    ).all(...values, Math.max(0, Math.floor(options.limit))) as Row[];
    return rows.map(toRunRecord);
  }

  appendEvent(runId: string, event: RunEvent): RunEvent {
    this.#assertOpen();
    const sequence = event.sequence ?? this.#nextSequence(runId);
    this.#lastSequence.set(
      runId,
      Math.max(sequence, this.#lastSequence.get(runId) ?? 0),
    );
    const stored: RunEvent = {
      ...event,
      run_id: runId,
      sequence,
      timestamp: event.timestamp ?? Date.now(),
    };
    this.#queue.push({
      runId,
      sequence,
      type: stored.type,
      json: JSON.stringify(stored),
      timestamp: stored.timestamp!,
    });
    return stored;
  }

  #nextSequence(runId: string): number {
    const known = this.#lastSequence.get(runId);
    if (known !== undefined) return known + 1;
    return this.#storedMaxSequence(runId) + 1;
  }

  #storedMaxSequence(runId: string): number {
    const row = this.#statement(
      "SELECT COALESCE(MAX(sequence), 0) AS last FROM events WHERE run_id = ?",
    ).get(runId) as Row;
    return Number(row.last);
  }

  flush(): void {
    this.#queue.flush();
  }

  #writeEvents(batch: QueuedEvent[]): void {
    this.#write("write run events", () => {
      const insert = this.#statement(
        `INSERT OR IGNORE INTO events (run_id, sequence, type, event_json, timestamp)
           VALUES (?, ?, ?, ?, ?)`,
      );
      inTransaction(this.#db, () => {
        for (const event of batch) {
          insert.run(
            event.runId,
            event.sequence,
            event.type,
            event.json,
            event.timestamp,
          );
        }
      });
    });
  }

  getEvents(runId: string, options: GetEventsOptions = {}): RunEvent[] {
    this.flush();
    const rows = this.#statement(
      "SELECT event_json FROM events WHERE run_id = ? AND sequence > ? ORDER BY sequence",
    ).all(runId, options.after ?? 0) as Row[];
    return rows.map((row) => JSON.parse(String(row.event_json)) as RunEvent);
  }

  markActiveRunsFailed(code: ErrorCode, message: string): string[] {
    this.flush();
    return this.#write(
      "fail the interrupted runs",
      () =>
        inTransaction(this.#db, () => {
          const rows = this.#statement(
            "SELECT run_id, owner_pid, owner_instance FROM runs WHERE status = 'active'",
          ).all() as Row[];
          const orphaned = rows.filter((row) => !this.#ownerIsAlive(row)).map((
            row,
          ) => String(row.run_id));
          const now = Date.now();
          const retryable = ERROR_CODES[code].retryable;
          for (const runId of orphaned) {
            this.#statement(
              `UPDATE runs SET status = 'failed', code = ?, error = ?, updated_at = ?,
               finished_at = ? WHERE run_id = ?`,
            ).run(code, message, now, now, runId);
            const sequence = this.#storedMaxSequence(runId) + 1;
            const event: RunEvent = {
              run_id: runId,
              type: "run.failed",
              data: { error: message, code, retryable },
              sequence,
              timestamp: now,
            };
            this.#statement(
              `INSERT INTO events (run_id, sequence, type, event_json, timestamp)
             VALUES (?, ?, ?, ?, ?)`,
            ).run(runId, sequence, event.type, JSON.stringify(event), now);
          }
          return orphaned;
        }),
    );
  }

  #ownerIsAlive(row: Row): boolean {
    if (openInstances.has(String(row.owner_instance))) return true;
    const pid = Number(row.owner_pid);
    // Same pid but not one of our open instances: an earlier incarnation (e.g. pid 1 in a container).
    if (!Number.isInteger(pid) || pid <= 0 || pid === Deno.pid) return false;
    return this.#isProcessAlive(pid);
  }

  close(): void {
    if (this.#closed) return;
    try {
      this.flush();
    } finally {
      this.#closed = true;
      this.#queue.close();
      openInstances.delete(this.#instanceId);
      this.#db.close();
    }
  }
}

function sessionKeyValues(key: SessionKey): string[] {
  return [
    key.conversationId,
    key.provider,
    key.location,
    key.target,
    key.workspace,
    key.agentCommand,
  ];
}

function toRunRecord(row: Row): RunRecord {
  const optional = (value: unknown) => value === null ? undefined : value;
  return {
    runId: String(row.run_id),
    conversationId: optional(row.conversation_id) as string | undefined,
    status: String(row.status) as RunStatus,
    config: JSON.parse(String(row.config_json)),
    code: optional(row.code) as string | undefined,
    error: optional(row.error) as string | undefined,
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
    finishedAt: optional(row.finished_at) as number | undefined,
  };
}
