/**
 * The embedded {@linkcode RunStore}: one SQLite file (`node:sqlite`) in WAL
 * mode, shared safely by several runner processes on one machine. Event
 * writes go through `event_queue.ts`: the events of one turn of the event
 * loop are committed in one transaction (a group commit), so the streaming
 * path does not pay for a commit per chunk. With `synchronous = NORMAL` a
 * commit is in the WAL file when it returns: it survives a crash or kill -9
 * of the process (the operating system still holds it), not a power loss or
 * an operating-system crash (the WAL is synced only at checkpoints).
 *
 * @module
 */

import { dirname } from "node:path";
import { DatabaseSync, type StatementSync } from "node:sqlite";
import { type ErrorCode, RunnerError } from "../errors.ts";
import type { RunEvent } from "../events.ts";
import {
  createOwnerCheck,
  isSameProcessAlive,
  ownStartTime,
} from "./owner_liveness.ts";
import { EventQueue, type QueuedEvent } from "./event_queue.ts";
import { failOrphanedRuns, findOrphanedRuns } from "./orphaned_runs.ts";
import { sessionKeyValues, toRunRecord, unavailable } from "./rows.ts";
import { inTransaction, migrateSchema } from "./schema.ts";
import type {
  GetEventsOptions,
  ListRunsOptions,
  NewRun,
  OpenStoreOptions,
  RunOutcome,
  RunRecord,
  SessionKey,
  SessionRecord,
  StoredSession,
  StoreHealth,
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
    db.exec(
      `PRAGMA busy_timeout = ${Math.floor(options.busyTimeoutMs ?? 5000)}`,
    );
    db.exec("PRAGMA journal_mode = WAL");
    // Committed transactions survive a killed process, not a power loss.
    db.exec("PRAGMA synchronous = NORMAL");
    migrateSchema(db, options.path);
    return new SqliteRunStore(db, options);
  } catch (error) {
    db.close();
    if (error instanceof RunnerError) throw error;
    throw unavailable(`open the store at ${options.path}`, error);
  }
}

class SqliteRunStore implements SyncRunStore {
  readonly #db: DatabaseSync;
  readonly #instanceId = crypto.randomUUID();
  readonly #ownerIsAlive: (row: Record<string, unknown>) => boolean;
  readonly #statements: Record<string, StatementSync> = {};
  readonly #queue: EventQueue;
  readonly #lastSequence = new Map<string, number>();
  #closed = false;
  /** The last failure of a write or read, until a write succeeds again. */
  #failure: string | undefined;

  constructor(db: DatabaseSync, options: OpenSqliteStoreOptions) {
    this.#db = db;
    this.#ownerIsAlive = createOwnerCheck({
      isProcessAlive: options.isProcessAlive ?? isSameProcessAlive,
      isOpenHere: (instance) => openInstances.has(instance),
    });
    const onFlushError = options.onFlushError ??
      ((error: RunnerError) =>
        console.error(`runner store [${error.code}]: ${error.message}`));
    this.#queue = new EventQueue({
      write: (batch) => this.#writeEvents(batch),
      onFlushError,
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
      const result = body();
      this.#failure = undefined;
      return result;
    } catch (error) {
      const failure = error instanceof RunnerError
        ? error
        : unavailable(action, error);
      this.#failure = failure.message;
      throw failure;
    }
  }

  #read<T>(action: string, body: () => T): T {
    this.#assertOpen();
    try {
      return body();
    } catch (error) {
      if (error instanceof RunnerError) throw error;
      const failure = unavailable(action, error);
      this.#failure = failure.message;
      throw failure;
    }
  }

  health(): StoreHealth {
    if (this.#closed) return { ok: false, error: "the store is closed" };
    try {
      this.#statement("SELECT COUNT(*) FROM runs WHERE status = 'active'")
        .get();
    } catch (error) {
      this.#failure = unavailable("read the store", error).message;
    }
    return this.#failure === undefined
      ? { ok: true }
      : { ok: false, error: this.#failure };
  }

  getSession(key: SessionKey): StoredSession | undefined {
    const row = this.#read("read the session", () =>
      this.#statement(
        `SELECT session_id, updated_at FROM sessions WHERE conversation_id = ? AND provider = ?
         AND location = ? AND target = ? AND workspace = ? AND agent_command = ?`,
      ).get(...sessionKeyValues(key))) as Row | undefined;
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
    const rows = this.#read("read the sessions", () =>
      this.#statement(
        "SELECT * FROM sessions WHERE conversation_id = ? ORDER BY updated_at DESC",
      ).all(conversationId)) as Row[];
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
           owner_instance, owner_start_time, created_at, updated_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ).run(
        run.runId,
        run.conversationId ?? null,
        run.status,
        JSON.stringify(run.config),
        Deno.pid,
        this.#instanceId,
        ownStartTime() ?? null,
        now,
        now,
      );
    });
    // A new run has no events: its first one needs no read of the store.
    this.#lastSequence.set(run.runId, 0);
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
    const row = this.#read(
      "read the run",
      () => this.#statement("SELECT * FROM runs WHERE run_id = ?").get(runId),
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
    const rows = this.#read("list the runs", () =>
      this.#statement(
        `SELECT * FROM runs ${where} ORDER BY created_at DESC, rowid DESC LIMIT ?`,
      ).all(...values, Math.max(0, Math.floor(options.limit)))) as Row[];
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
    const row = this.#read("read the run's events", () =>
      this.#statement(
        "SELECT COALESCE(MAX(sequence), 0) AS last FROM events WHERE run_id = ?",
      ).get(runId)) as Row;
    return Number(row.last);
  }

  flush(): void {
    this.#queue.flush();
  }

  durable(): Promise<void> {
    return this.#queue.durable();
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
    try {
      this.flush();
    } catch {
      // Writes are failing: answer with what is stored (the queued events
      // show once they are written; until then no reader sees them).
    }
    const rows = this.#read("read the run's events", () =>
      this.#statement(
        "SELECT event_json FROM events WHERE run_id = ? AND sequence > ? ORDER BY sequence LIMIT ?",
      ).all(runId, options.after ?? 0, options.limit ?? -1)) as Row[];
    return rows.map((row) => JSON.parse(String(row.event_json)) as RunEvent);
  }

  markActiveRunsFailed(
    code: ErrorCode,
    message: string,
    options: { runId?: string } = {},
  ): string[] {
    const context = {
      statement: (sql: string) => this.#statement(sql),
      ownerIsAlive: (row: Row) => this.#ownerIsAlive(row),
      code,
      message,
      runId: options.runId,
    };
    // Look first without a write lock: usually nothing is orphaned.
    const candidates = this.#read(
      "read the active runs",
      () => findOrphanedRuns(context),
    );
    if (!candidates.length) return [];
    this.flush();
    return this.#write(
      "fail the interrupted runs",
      () => inTransaction(this.#db, () => failOrphanedRuns(context)),
    );
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
