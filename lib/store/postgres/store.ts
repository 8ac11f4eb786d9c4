/**
 * The PostgreSQL {@linkcode RunStore}: one database shared by every replica
 * of a fleet (`--store postgres://…`). Event writes are batched (a group
 * commit: one multi-row insert per batch, in order, each batch as soon as
 * the previous one committed, durable once it returns); a run belongs to
 * the replica instance that created it, and runs whose replica's lease
 * lapsed are failed exactly once by whichever replica sweeps first. See
 * `docs/fleet.md`.
 *
 * `store/postgres/` owns the fleet's store and nothing the embedded one
 * uses: the batched event writer (`batch_writer.ts`), the schema and its
 * migrations (`schema.ts`), the replica leases and shared fleet state
 * (`fleet.ts`), the fencing check (`fencing.ts`), ending lost replicas' runs
 * (`orphans.ts`) and pruning (`retention.ts`). It is loaded only for
 * `--store postgres://…`.
 *
 * @module
 */

import postgres from "postgres";
import { type ErrorCode, RunnerError } from "../../errors.ts";
import type { RunEvent, UsageCost } from "../../events.ts";
import { BatchWriter } from "./batch_writer.ts";
import type { QueuedEvent } from "../event_queue.ts";
import type { SharedStoreOptions } from "../fleet.ts";
import { ownStartTime } from "../owner_liveness.ts";
import { leaseLost, PostgresFleet } from "./fleet.ts";
import { LeaseLapsedDuringWrite, stillLive, writableRuns } from "./fencing.ts";
import { failLostReplicaRuns } from "./orphans.ts";
import { migratePostgres } from "./schema.ts";
import { postgresSize, prunePostgresRuns } from "./retention.ts";
import { listRunsQuery } from "../run_listing.ts";
import {
  sessionCostJson,
  toRunRecord,
  toSessionRecord,
  toStoredSession,
  usageJson,
} from "../rows.ts";
import { UnstoredOutcomes } from "../unstored_outcomes.ts";
import type {
  GetEventsOptions,
  ImportConflict,
  ImportedRun,
  ListRunsOptions,
  NewRun,
  PrunedRuns,
  PruneRunsOptions,
  RunOutcome,
  RunRecord,
  RunStore,
  SessionKey,
  SessionRecord,
  StoredSession,
  StoreHealth,
} from "../types.ts";
import { transaction } from "./transaction.ts";

/** Run ids whose last sequence a store remembers at most (oldest forgotten first). */
const REMEMBERED_RUNS = 10_000;

/** Options for {@linkcode openPostgresStore}. */
export interface OpenPostgresStoreOptions extends SharedStoreOptions {
  /** Called when a background event write fails (events stay queued and are retried). */
  onFlushError?: (error: RunnerError) => void;
}

/**
 * Connects, migrates, registers this replica's lease and returns the store.
 *
 * @throws {RunnerError} `store.unavailable` when the database cannot be
 * reached; `store.schema_too_new` when a newer runner migrated it.
 */
export async function openPostgresStore(
  options: OpenPostgresStoreOptions,
): Promise<RunStore> {
  const sql = postgres(options.url, {
    max: 8,
    onnotice: () => {},
    connect_timeout: 5,
    // The driver's default waits up to 20 s between tries: after an outage,
    // queries would wait that long for a database that is already back.
    backoff: reconnectDelaySeconds,
    connection: { application_name: `runner ${options.replicaId}` },
  });
  try {
    await migratePostgres(sql);
    const fleet = new PostgresFleet({
      sql,
      replicaId: options.replicaId,
      instanceId: crypto.randomUUID(),
      url: options.advertiseUrl,
      leaseMs: options.leaseMs,
      log: options.log ?? (() => {}),
    });
    await fleet.start();
    return new PostgresRunStore(sql, fleet, options);
  } catch (error) {
    await sql.end({ timeout: 1 }).catch(() => {});
    throw toStoreError("open the PostgreSQL store", error);
  }
}

/** Seconds before the `retries`-th reconnection attempt: doubling, at most one. */
function reconnectDelaySeconds(retries: number): number {
  return Math.min(0.05 * 2 ** retries, 1);
}

/** A driver failure as `store.unavailable` (runner errors pass through). */
function toStoreError(action: string, error: unknown): RunnerError {
  if (error instanceof RunnerError) return error;
  const reason = error instanceof Error ? error.message : String(error);
  return new RunnerError(
    "store.unavailable",
    `Could not ${action}: ${reason}; check that PostgreSQL is reachable at --store (RUNNER_STORE_URL).`,
    { cause: error },
  );
}

class PostgresRunStore implements RunStore {
  readonly fleet: PostgresFleet;
  readonly #sql: postgres.Sql;
  readonly #writer: BatchWriter;
  readonly #lastSequence = new Map<string, number>();
  readonly #unstored = new UnstoredOutcomes();
  readonly #instanceId: string;
  /** Listeners of runs this replica may still write, by run id. */
  readonly #fenceWatchers = new Map<string, Set<() => void>>();
  #closed = false;
  /** The last failed query, until a write succeeds again. */
  #failure: { message: string; at: number } | undefined;

  constructor(
    sql: postgres.Sql,
    fleet: PostgresFleet,
    options: OpenPostgresStoreOptions,
  ) {
    this.#sql = sql;
    this.fleet = fleet;
    this.#instanceId = fleet.instanceId;
    this.#writer = new BatchWriter({
      write: (batch) => this.#writeEvents(batch),
      hold: options.holdEvents,
      onFlushError: options.onFlushError ??
        ((error) =>
          console.error(`runner store [${error.code}]: ${error.message}`)),
    });
    // A lost lease fences every run written under it; their outcomes not
    // stored yet never will be (the fleet ends those runs), so no read here
    // may show them.
    fleet.onLeaseLost(() => {
      this.#unstored.clear();
      for (const runId of [...this.#fenceWatchers.keys()]) this.#fenced(runId);
    });
  }

  watchFence(runId: string, listener: () => void): () => void {
    const listeners = this.#fenceWatchers.get(runId) ?? new Set();
    listeners.add(listener);
    this.#fenceWatchers.set(runId, listeners);
    return () => {
      listeners.delete(listener);
      if (!listeners.size) this.#fenceWatchers.delete(runId);
    };
  }

  /** Who writes now: this process under its live epoch (undefined: none). */
  #owner(): { instanceId: string; epoch: number | undefined } {
    return { instanceId: this.#instanceId, epoch: this.fleet.liveEpoch() };
  }

  /** Tells a fenced run's watchers (once) and has the lease checked. */

  #fenced(runId: string): void {
    const listeners = this.#fenceWatchers.get(runId);
    this.#fenceWatchers.delete(runId);
    this.#unstored.forget(runId);
    // Its queued events stay queued: the next batch skips them (fenced) and
    // counts them done. Taken out of the queue, they would never count, and
    // every later event's wait to become visible would hang.
    this.fleet.checkLease();
    for (const listener of listeners ?? []) listener();
  }

  /**
   * Runs a query after checking the store is open; driver failures become
   * `store.unavailable` and mark the store unhealthy until a write succeeds.
   */
  async #query<T>(
    action: string,
    body: () => Promise<T>,
    kind: "read" | "write" = "read",
  ): Promise<T> {
    if (this.#closed) {
      throw new RunnerError(
        "runner.internal",
        "Internal error: the run store is already closed.",
      );
    }
    try {
      const result = await body();
      if (kind === "write") this.#failure = undefined;
      return result;
    } catch (error) {
      const failure = toStoreError(action, error);
      this.#failure = { message: failure.message, at: Date.now() };
      throw failure;
    }
  }

  health(): Promise<StoreHealth> {
    if (this.#closed) {
      return Promise.resolve({ ok: false, error: "the store is closed" });
    }
    const lease = this.fleet.leaseHealth();
    if (!lease.ok) return Promise.resolve({ ok: false, error: lease.error });
    // A lease renewal (a write) after the failure shows the database is back.
    if (this.#failure && this.#failure.at >= lease.renewedAt) {
      return Promise.resolve({ ok: false, error: this.#failure.message });
    }
    return Promise.resolve({ ok: true });
  }

  getSession(key: SessionKey): Promise<StoredSession | undefined> {
    return this.#query("read the session", async () => {
      const [row] = await this.#sql`SELECT session_id, updated_at,
        settings_json, cost_json
        FROM sessions
        WHERE conversation_id = ${key.conversationId} AND provider = ${key.provider}
        AND location = ${key.location} AND target = ${key.target}
        AND workspace = ${key.workspace} AND agent_command = ${key.agentCommand}`;
      return row ? toStoredSession(row) : undefined;
    });
  }

  putSession(key: SessionKey, sessionId: string): Promise<void> {
    return this.#query("store the session id", async () => {
      // Only under this replica's live lease: a fenced owner's session id
      // is not the conversation's any more.
      await this.#sql`INSERT INTO sessions (conversation_id, provider, location,
        target, workspace, agent_command, session_id, updated_at)
        SELECT ${key.conversationId}, ${key.provider}, ${key.location},
          ${key.target}, ${key.workspace}, ${key.agentCommand}, ${sessionId},
          ${Date.now()}
        WHERE ${this.fleet.ownLease()}
        ON CONFLICT (conversation_id, provider, location, target, workspace,
          agent_command)
        DO UPDATE SET session_id = excluded.session_id,
          updated_at = excluded.updated_at`;
    }, "write");
  }

  putSessionSettings(
    key: SessionKey,
    settings: Record<string, unknown>,
  ): Promise<void> {
    return this.#query("store the session's config values", async () => {
      // Only under this replica's live lease, as the session id itself.
      await this.#sql`UPDATE sessions SET settings_json = ${
        JSON.stringify(settings)
      }, updated_at = ${Date.now()}
        WHERE conversation_id = ${key.conversationId} AND provider = ${key.provider}
        AND location = ${key.location} AND target = ${key.target}
        AND workspace = ${key.workspace} AND agent_command = ${key.agentCommand}
        AND ${this.fleet.ownLease()}`;
    }, "write");
  }

  putSessionCost(
    key: SessionKey,
    sessionCost: { sessionId: string; cost: UsageCost },
  ): Promise<void> {
    return this.#query("store the session's cost", async () => {
      // Only under this replica's live lease, as the session id itself.
      await this.#sql`UPDATE sessions SET cost_json = ${
        sessionCostJson(sessionCost)
      }
        WHERE conversation_id = ${key.conversationId} AND provider = ${key.provider}
        AND location = ${key.location} AND target = ${key.target}
        AND workspace = ${key.workspace} AND agent_command = ${key.agentCommand}
        AND ${this.fleet.ownLease()}`;
    }, "write");
  }

  deleteSessions(conversationId: string): Promise<number> {
    return this.#query("delete the sessions", async () => {
      const result = await this.#sql`DELETE FROM sessions
        WHERE conversation_id = ${conversationId}`;
      return result.count;
    }, "write");
  }

  listSessions(conversationId: string): Promise<SessionRecord[]> {
    return this.#query("list the sessions", async () => {
      const rows = await this.#sql`SELECT * FROM sessions
        WHERE conversation_id = ${conversationId} ORDER BY updated_at DESC`;
      return rows.map(toSessionRecord);
    });
  }

  createRun(run: NewRun): Promise<void> {
    this.#remember(run.runId, 0);
    return this.#query("record the run", async () => {
      const now = Date.now();
      const created = await this.#sql`INSERT INTO runs (run_id, conversation_id,
        status, config_json, owner_replica, owner_instance, owner_epoch,
        owner_pid, owner_start_time, created_at, updated_at, prompt)
        SELECT ${run.runId}, ${run.conversationId ?? null}, ${run.status},
          ${JSON.stringify(run.config)}, ${this.fleet.replicaId},
          ${this.#instanceId}, ${this.fleet.epoch}, ${Deno.pid},
          ${ownStartTime() ?? null}, ${now}, ${now}, ${run.prompt ?? null}
        WHERE ${this.fleet.ownLease()}`;
      if (created.count === 0) {
        this.fleet.checkLease();
        throw leaseLost(this.fleet.replicaId);
      }
    }, "write");
  }

  importRuns(
    runs: readonly ImportedRun[],
  ): Promise<ImportConflict | undefined> {
    return this.#query(
      "import the runs",
      () =>
        transaction(this.#sql, async (tx): Promise<
          ImportConflict | undefined
        > => {
          const runIds = runs.map(({ record }) => record.runId);
          if (!runIds.length) return undefined;
          const taken = await tx`SELECT run_id FROM runs
          WHERE run_id IN ${tx(runIds)}`;
          if (taken.length) {
            return {
              kind: "runs",
              runIds: taken.map((row) => String(row.run_id)),
            };
          }
          const conversationId = runs.find(({ record }) =>
            record.conversationId
          )?.record.conversationId;
          if (conversationId) {
            const known = await tx`SELECT 1 FROM runs
            WHERE conversation_id = ${conversationId}
            UNION ALL SELECT 1 FROM sessions
            WHERE conversation_id = ${conversationId} LIMIT 1`;
            if (known.length) return { kind: "conversation", conversationId };
          }
          for (const { record, events } of runs) {
            // Owned by nobody alive: no replica renews the epoch -1.
            await tx`INSERT INTO runs (run_id, conversation_id, status,
            config_json, code, error, owner_replica, owner_instance,
            owner_epoch, created_at, updated_at, finished_at, prompt,
            usage_json)
            VALUES (${record.runId}, ${record.conversationId ?? null},
              ${record.status}, ${JSON.stringify(record.config)},
              ${record.code ?? null}, ${record.error ?? null}, ${"imported"},
              ${"imported"}, ${-1}, ${record.createdAt}, ${record.updatedAt},
              ${record.finishedAt ?? record.updatedAt},
              ${record.prompt ?? null}, ${usageJson(record.usage)})`;
            const rows = events.map((event) => ({
              run_id: record.runId,
              sequence: event.sequence!,
              type: event.type,
              event_json: JSON.stringify({ ...event, run_id: record.runId }),
              timestamp: event.timestamp!,
            }));
            if (rows.length) {
              await tx`INSERT INTO events ${
                tx(
                  rows,
                  "run_id",
                  "sequence",
                  "type",
                  "event_json",
                  "timestamp",
                )
              }`;
            }
          }
          return undefined;
        }),
      "write",
    );
  }

  async finishRun(runId: string, outcome: RunOutcome): Promise<boolean> {
    try {
      await this.flush();
      this.#lastSequence.delete(runId);
      const finished = await this.#finish(runId, outcome);
      this.#unstored.forget(runId);
      return finished;
    } catch (error) {
      // Until the retried write lands, the run reads as ended; a fenced run
      // is the fleet's to end, not this replica's.
      const fenced = error instanceof RunnerError &&
        error.code === "runner.replica_lost";
      if (!fenced) this.#unstored.remember(runId, outcome);
      throw error;
    }
  }

  async #finish(runId: string, outcome: RunOutcome): Promise<boolean> {
    const owner = this.#owner();
    const finished = await this.#query(
      "record the run's end",
      () =>
        transaction(this.#sql, async (tx) => {
          const status = (await writableRuns(tx, owner, [runId])).get(runId);
          if (status === undefined) return undefined;
          const now = Date.now();
          const result = await tx`UPDATE runs SET status = ${outcome.status},
          code = ${outcome.code ?? null}, error = ${outcome.error ?? null},
          usage_json = ${usageJson(outcome.usage)},
          updated_at = ${now}, finished_at = ${now}
          WHERE run_id = ${runId} AND status = 'active'`;
          stillLive(this.fleet, owner.epoch);
          return result.count === 1;
        }).catch(fencedAsUndefined),
      "write",
    );
    if (finished !== undefined) return finished;
    const [known] = await this.#query(
      "read the run",
      () => this.#sql`SELECT 1 FROM runs WHERE run_id = ${runId}`,
    );
    if (!known) return false;
    // Fenced: the fleet ends this run (or already did), not this replica.
    this.#fenced(runId);
    throw new RunnerError(
      "runner.replica_lost",
      `This replica lost its fleet lease while run ${runId} was active, so the fleet ended the run; start it again (any replica can take it).`,
    );
  }

  getRun(runId: string): Promise<RunRecord | undefined> {
    return this.#query("read the run", async () => {
      const [row] = await this.#sql`SELECT * FROM runs WHERE run_id = ${runId}`;
      return row ? this.#unstored.apply(toRunRecord(row)) : undefined;
    });
  }

  listRuns(options: ListRunsOptions): Promise<RunRecord[]> {
    return this.#query("list the runs", async () => {
      const query = listRunsQuery(options, "postgres");
      const rows = await this.#sql.unsafe(query.text, query.values);
      return this.#unstored.applyToListing(rows.map(toRunRecord), options);
    });
  }

  pruneRuns(options: PruneRunsOptions): Promise<PrunedRuns> {
    return this.#query(
      "prune old runs",
      () => prunePostgresRuns(this.#sql, options),
      "write",
    );
  }

  size(): Promise<number> {
    return this.#query("read the store's size", () => postgresSize(this.#sql));
  }

  appendEvent(runId: string, event: RunEvent): RunEvent {
    if (this.#closed) {
      throw new RunnerError(
        "runner.internal",
        "Internal error: the run store is already closed.",
      );
    }
    const known = this.#lastSequence.get(runId);
    if (event.sequence === undefined && known === undefined) {
      throw new RunnerError(
        "runner.internal",
        `Internal error: run ${runId} was neither created nor read by this store, so it cannot number the event.`,
      );
    }
    const sequence = event.sequence ?? known! + 1;
    this.#remember(runId, Math.max(sequence, known ?? 0));
    const stored: RunEvent = {
      ...event,
      run_id: runId,
      sequence,
      timestamp: event.timestamp ?? Date.now(),
    };
    this.#writer.push({
      runId,
      sequence,
      type: stored.type,
      json: JSON.stringify(stored),
      timestamp: stored.timestamp!,
    });
    return stored;
  }

  #remember(runId: string, sequence: number): void {
    this.#lastSequence.delete(runId);
    this.#lastSequence.set(runId, sequence);
    if (this.#lastSequence.size > REMEMBERED_RUNS) {
      this.#lastSequence.delete(this.#lastSequence.keys().next().value!);
    }
  }

  flush(): Promise<void> {
    return this.#writer.flush();
  }

  durable(): Promise<void> {
    return this.#writer.durable();
  }

  #writeEvents(batch: QueuedEvent[]): Promise<void> {
    return this.#query("write run events", async () => {
      const runIds = [...new Set(batch.map((event) => event.runId))];
      const owner = this.#owner();
      const fenced = await transaction(this.#sql, async (tx) => {
        // Only runs this replica still owns, under a live lease, and active.
        const writable = await writableRuns(tx, owner, runIds);
        const rows = batch.filter((event) =>
          writable.get(event.runId) === "active"
        ).map((event) => ({
          run_id: event.runId,
          sequence: event.sequence,
          type: event.type,
          event_json: event.json,
          timestamp: event.timestamp,
        }));
        if (rows.length) {
          await tx`INSERT INTO events ${
            tx(rows, "run_id", "sequence", "type", "event_json", "timestamp")
          } ON CONFLICT DO NOTHING`;
          stillLive(this.fleet, owner.epoch);
        }
        return runIds.filter((runId) => !writable.has(runId));
      }).catch(fencedAsUndefined) ?? runIds;
      for (const runId of fenced) this.#fenced(runId);
    }, "write");
  }

  async getEvents(
    runId: string,
    options: GetEventsOptions = {},
  ): Promise<RunEvent[]> {
    const after = options.after ?? 0;
    try {
      await this.flush();
    } catch {
      // Writes are failing: answer with what is stored (the queued events
      // show once they are written; until then no reader sees them).
    }
    const events = await this.#query("read run events", async () => {
      const limit = options.limit === undefined
        ? this.#sql``
        : this.#sql`LIMIT ${Math.max(0, Math.floor(options.limit))}`;
      const rows = await this.#sql`SELECT event_json FROM events
        WHERE run_id = ${runId} AND sequence > ${after}
        ORDER BY sequence ${limit}`;
      return rows.map((row) => JSON.parse(String(row.event_json)) as RunEvent);
    });
    const last = events.at(-1)?.sequence;
    if (last !== undefined && last > (this.#lastSequence.get(runId) ?? 0)) {
      this.#remember(runId, last);
    }
    return events;
  }

  async markActiveRunsFailed(
    code: ErrorCode,
    message: string,
    options: { runId?: string } = {},
  ): Promise<string[]> {
    await this.flush();
    return await this.#query(
      "fail the runs of lost replicas",
      () =>
        failLostReplicaRuns(this.#sql, { code, message, runId: options.runId }),
      "write",
    );
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    try {
      await this.flush();
    } catch (error) {
      console.error(`runner store: ${(error as Error).message}`);
    }
    this.#closed = true;
    this.#writer.close();
    await this.fleet.stop(true).catch(() => {});
    await this.#sql.end({ timeout: 2 });
  }
}

/** A write transaction rolled back for a lease lapsed meanwhile: undefined. */
function fencedAsUndefined(error: unknown): undefined {
  if (error instanceof LeaseLapsedDuringWrite) return undefined;
  throw error;
}
