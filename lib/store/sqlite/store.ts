/**
 * The embedded {@linkcode RunStore}: one SQLite file (`node:sqlite`) in WAL
 * mode, shared safely by several runner processes on one machine. Event
 * writes go through `store/event_queue.ts`: the events of one turn of the event
 * loop are committed in one transaction (a group commit), so the streaming
 * path does not pay for a commit per chunk. With `synchronous = NORMAL` a
 * commit is in the WAL file when it returns: it survives a crash or kill -9
 * of the process (the operating system still holds it), not a power loss or
 * an operating-system crash (the WAL is synced only at checkpoints).
 * Pruning (`retention.ts`) hands freed pages back (incremental
 * vacuum); `runner serve` checks the file's pages at open (`file.ts`).
 *
 * `store/sqlite/` owns the embedded store: this file, its schema and
 * migrations (`schema.ts`), the file's upkeep at open (`file.ts`), pruning
 * (`retention.ts`) and the asynchronous interface over the synchronous store
 * (`sync_adapter.ts`). What both stores share (rows, the event queue, ending
 * orphaned runs, the owner check) stays in `store/`.
 *
 * @module
 */

import { dirname } from "node:path";
import { DatabaseSync, type StatementSync } from "node:sqlite";
import { type ErrorCode, RunnerError } from "../../errors.ts";
import type { RunEvent, UsageCost } from "../../events.ts";
import {
  createOwnerCheck,
  isSameProcessAlive,
  ownStartTime,
} from "../owner_liveness.ts";
import { EventQueue, type QueuedEvent } from "../event_queue.ts";
import { failOrphanedRuns, findOrphanedRuns } from "../orphaned_runs.ts";
import { listRunsQuery } from "../run_listing.ts";
import {
  sessionCostJson,
  sessionKeyValues,
  toRunRecord,
  toSessionRecord,
  toStoredSession,
  unavailable,
  usageJson,
} from "../rows.ts";
import { inTransaction, migrateSchema } from "./schema.ts";
import {
  damagedFileMessage,
  enableIncrementalVacuum,
  isDamage,
  quickCheck,
} from "./file.ts";
import { pruneSqliteRuns, sqliteSize } from "./retention.ts";
import { UnstoredOutcomes } from "../unstored_outcomes.ts";
import type {
  GetEventsOptions,
  ImportConflict,
  ImportedRun,
  ListRunsOptions,
  NewRun,
  OpenStoreOptions,
  PrunedRuns,
  PruneRunsOptions,
  RunOutcome,
  RunRecord,
  SessionKey,
  SessionRecord,
  StoredSession,
  StoreHealth,
  SyncRunStore,
} from "../types.ts";

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
 * and running pending migrations (and, when asked, checking the file and
 * converting it for incremental vacuum).
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
    // Only takes on a new file, before the WAL switch writes its header.
    db.exec("PRAGMA auto_vacuum = INCREMENTAL");
    db.exec("PRAGMA journal_mode = WAL");
    // Committed transactions survive a killed process, not a power loss.
    db.exec("PRAGMA synchronous = NORMAL");
    migrateSchema(db, options.path);
    const damage = options.checkIntegrity ? quickCheck(db) : undefined;
    if (damage !== undefined) {
      options.log?.({
        msg: "the store file is damaged",
        level: "error",
        path: options.path,
        error: damage,
      });
    } else if (options.reclaimSpace) {
      reclaimSpace(db, options);
    }
    return new SqliteRunStore(db, {
      ...options,
      damage: damage && damagedFileMessage(options.path, damage),
    });
  } catch (error) {
    db.close();
    if (error instanceof RunnerError) throw error;
    throw unavailable(`open the store at ${options.path}`, error);
  }
}

/** Converts an older file for incremental vacuum; a failure is logged, not thrown. */
function reclaimSpace(db: DatabaseSync, options: OpenSqliteStoreOptions): void {
  const started = performance.now();
  try {
    if (enableIncrementalVacuum(db)) {
      options.log?.({
        msg: "store file converted so pruned runs give their space back",
        path: options.path,
        ms: Math.round(performance.now() - started),
      });
    }
  } catch (error) {
    options.log?.({
      msg:
        "could not convert the store file for incremental vacuum; pruned runs' space is reused but not given back",
      level: "warn",
      path: options.path,
      error: error instanceof Error ? error.message : String(error),
    });
  }
}

class SqliteRunStore implements SyncRunStore {
  readonly #db: DatabaseSync;
  readonly #instanceId = crypto.randomUUID();
  readonly #ownerIsAlive: (row: Record<string, unknown>) => boolean;
  readonly #statements: Record<string, StatementSync> = {};
  readonly #queue: EventQueue;
  readonly #lastSequence = new Map<string, number>();
  readonly #unstored = new UnstoredOutcomes();
  readonly #path: string;
  #closed = false;
  /** The last failure of a write or read, until a write succeeds again. */
  #failure: string | undefined;
  /** Why the file is damaged, once found: the store stays unhealthy. */
  #damage: string | undefined;

  constructor(
    db: DatabaseSync,
    options: OpenSqliteStoreOptions & { damage?: string },
  ) {
    this.#db = db;
    this.#path = options.path;
    this.#damage = options.damage;
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
      this.#failed(failure, error);
      throw failure;
    }
  }

  /** Records a failure; one that says the file is damaged is kept for good. */
  #failed(failure: RunnerError, cause: unknown): void {
    this.#failure = failure.message;
    if (this.#damage === undefined && isDamage(cause)) {
      this.#damage = damagedFileMessage(
        this.#path,
        cause instanceof Error ? cause.message : String(cause),
      );
    }
  }

  #read<T>(action: string, body: () => T): T {
    this.#assertOpen();
    try {
      return body();
    } catch (error) {
      if (error instanceof RunnerError) throw error;
      const failure = unavailable(action, error);
      this.#failed(failure, error);
      throw failure;
    }
  }

  health(): StoreHealth {
    if (this.#closed) return { ok: false, error: "the store is closed" };
    try {
      // One page: the health check never waits for the store's size.
      this.#statement("SELECT 1 FROM runs LIMIT 1").get();
    } catch (error) {
      this.#failed(unavailable("read the store", error), error);
    }
    const error = this.#damage ?? this.#failure;
    return error === undefined ? { ok: true } : { ok: false, error };
  }

  getSession(key: SessionKey): StoredSession | undefined {
    const row = this.#read("read the session", () =>
      this.#statement(
        `SELECT session_id, updated_at, settings_json, cost_json FROM sessions WHERE conversation_id = ? AND provider = ?
         AND location = ? AND target = ? AND workspace = ? AND agent_command = ?`,
      ).get(...sessionKeyValues(key))) as Row | undefined;
    return row === undefined ? undefined : toStoredSession(row);
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

  putSessionSettings(key: SessionKey, settings: Record<string, unknown>): void {
    this.#write("store the session's config values", () => {
      this.#statement(
        `UPDATE sessions SET settings_json = ?, updated_at = ? WHERE conversation_id = ?
         AND provider = ? AND location = ? AND target = ? AND workspace = ? AND agent_command = ?`,
      ).run(JSON.stringify(settings), Date.now(), ...sessionKeyValues(key));
    });
  }

  putSessionCost(
    key: SessionKey,
    sessionCost: { sessionId: string; cost: UsageCost },
  ): void {
    this.#write("store the session's cost", () => {
      this.#statement(
        `UPDATE sessions SET cost_json = ? WHERE conversation_id = ?
         AND provider = ? AND location = ? AND target = ? AND workspace = ? AND agent_command = ?`,
      ).run(sessionCostJson(sessionCost), ...sessionKeyValues(key));
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
    return rows.map(toSessionRecord);
  }

  createRun(run: NewRun): void {
    this.#write("record the run", () => {
      const now = Date.now();
      this.#statement(
        `INSERT INTO runs (run_id, conversation_id, status, config_json, owner_pid,
           owner_instance, owner_start_time, created_at, updated_at, prompt)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
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
        run.prompt ?? null,
      );
    });
    // A new run has no events: its first one needs no read of the store.
    this.#lastSequence.set(run.runId, 0);
  }

  finishRun(runId: string, outcome: RunOutcome): boolean {
    try {
      this.flush();
      this.#lastSequence.delete(runId);
      const finished = this.#finish(runId, outcome);
      this.#unstored.forget(runId);
      return finished;
    } catch (error) {
      // Until the retried write lands, the run reads as ended.
      this.#unstored.remember(runId, outcome);
      throw error;
    }
  }

  #finish(runId: string, outcome: RunOutcome): boolean {
    return this.#write("record the run's end", () => {
      const now = Date.now();
      const result = this.#statement(
        `UPDATE runs SET status = ?, code = ?, error = ?, usage_json = ?, updated_at = ?, finished_at = ?
         WHERE run_id = ? AND status = 'active'`,
      ).run(
        outcome.status,
        outcome.code ?? null,
        outcome.error ?? null,
        usageJson(outcome.usage),
        now,
        now,
        runId,
      );
      return Number(result.changes) === 1;
    });
  }

  importRuns(runs: readonly ImportedRun[]): ImportConflict | undefined {
    return this.#write("import the runs", () =>
      inTransaction(this.#db, () => {
        const exists = this.#statement("SELECT 1 FROM runs WHERE run_id = ?");
        const taken = runs.map(({ record }) => record.runId).filter((runId) =>
          exists.get(runId) !== undefined
        );
        if (taken.length) return { kind: "runs" as const, runIds: taken };
        const conversationId = runs.find(({ record }) => record.conversationId)
          ?.record.conversationId;
        if (conversationId && this.#conversationKnown(conversationId)) {
          return { kind: "conversation" as const, conversationId };
        }
        const insertRun = this.#statement(
          `INSERT INTO runs (run_id, conversation_id, status, config_json, code,
             error, created_at, updated_at, finished_at, prompt, usage_json)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        );
        const insertEvent = this.#statement(
          `INSERT INTO events (run_id, sequence, type, event_json, timestamp)
             VALUES (?, ?, ?, ?, ?)`,
        );
        for (const { record, events } of runs) {
          insertRun.run(
            record.runId,
            record.conversationId ?? null,
            record.status,
            JSON.stringify(record.config),
            record.code ?? null,
            record.error ?? null,
            record.createdAt,
            record.updatedAt,
            record.finishedAt ?? record.updatedAt,
            record.prompt ?? null,
            usageJson(record.usage),
          );
          for (const event of events) {
            insertEvent.run(
              record.runId,
              event.sequence!,
              event.type,
              JSON.stringify({ ...event, run_id: record.runId }),
              event.timestamp!,
            );
          }
        }
        return undefined;
      }));
  }

  /** Whether the store has a run or a session of the conversation. */
  #conversationKnown(conversationId: string): boolean {
    return this.#statement(
      `SELECT 1 FROM runs WHERE conversation_id = ?
       UNION ALL SELECT 1 FROM sessions WHERE conversation_id = ? LIMIT 1`,
    ).get(conversationId, conversationId) !== undefined;
  }

  getRun(runId: string): RunRecord | undefined {
    const row = this.#read(
      "read the run",
      () => this.#statement("SELECT * FROM runs WHERE run_id = ?").get(runId),
    ) as
      | Row
      | undefined;
    return row === undefined
      ? undefined
      : this.#unstored.apply(toRunRecord(row));
  }

  listRuns(options: ListRunsOptions): RunRecord[] {
    const query = listRunsQuery(options, "sqlite");
    const rows = this.#read(
      "list the runs",
      () => this.#statement(query.text).all(...query.values),
    ) as Row[];
    return this.#unstored.applyToListing(rows.map(toRunRecord), options);
  }

  pruneRuns(options: PruneRunsOptions): PrunedRuns {
    return this.#write("prune old runs", () =>
      pruneSqliteRuns({
        db: this.#db,
        statement: (sql) => this.#statement(sql),
      }, options));
  }

  size(): number {
    return this.#read("read the store's size", () =>
      sqliteSize({
        db: this.#db,
        statement: (sql) => this.#statement(sql),
      }));
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
