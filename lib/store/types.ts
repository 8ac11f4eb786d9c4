/**
 * The run store: where `runner serve` and `runner run` keep ACP session ids
 * per conversation, run records and each run's event log. {@linkcode RunStore}
 * is the interface; `open.ts` opens an implementation (the embedded SQLite
 * file under a data directory, safe to share between processes on one
 * machine).
 *
 * @module
 */

import type { ErrorCode } from "../errors.ts";
import { RunnerError } from "../errors.ts";
import type { RunEvent, RunUsage, UsageCost } from "../events.ts";
import type { FleetStore, SharedStoreOptions } from "./fleet.ts";

/**
 * Everything a stored ACP session id depends on: a session is only reused
 * when the same conversation asks the same agent on the same machine and
 * workspace again.
 */
export interface SessionKey {
  /** The control plane's conversation id. */
  conversationId: string;
  /** The provider name (`codex`, `custom`, …). */
  provider: string;
  /** `local`, `remote-ssh` or `daemon`. */
  location: string;
  /** The daemon id or SSH target; `""` for local runs. */
  target: string;
  /** The agent's workspace directory (on the machine that runs it). */
  workspace: string;
  /** The agent command line that was launched. */
  agentCommand: string;
}

/** A stored ACP session id. */
export interface StoredSession {
  /** The agent's session id. */
  sessionId: string;
  /**
   * The session config values the conversation remembers with it (`model`,
   * `mode`, `config`: what the run that last configured the session asked
   * for; `docs/runs.md`, "Session config options"), if any.
   */
  settings?: Record<string, unknown>;
  /**
   * The session's running cost as the agent last reported it (ACP
   * `usage_update.cost`), if a run of this session reported one.
   */
  cost?: UsageCost;
  /** When it was last stored, in milliseconds since the epoch. */
  updatedAt: number;
}

/** A stored session with its full key, as {@linkcode RunStore.listSessions} returns it. */
export interface SessionRecord extends SessionKey, StoredSession {}

/** Where a run is in its life. */
export type RunStatus = "active" | "completed" | "failed" | "cancelled";

/** A run's final status. */
export type FinalRunStatus = Exclude<RunStatus, "active">;

/** What {@linkcode RunStore.createRun} records. */
export interface NewRun {
  /** The run id. */
  runId: string;
  /** The conversation the run belongs to, if any. */
  conversationId?: string;
  /** The run's config, already stripped of secrets. */
  config: Record<string, unknown>;
  /** The first input's text, whole, already stripped of secrets. */
  prompt?: string;
  /** Always `active`: a run is created when it starts. */
  status: "active";
}

/** How a run ended, for {@linkcode RunStore.finishRun}. */
export interface RunOutcome {
  /** The final status. */
  status: FinalRunStatus;
  /** The failure code, for failed or cancelled runs. */
  code?: string;
  /** The failure message shown to users. */
  error?: string;
  /** What the agent reported (the terminal event's `usage`), if anything. */
  usage?: RunUsage;
}

/** A stored run. */
export interface RunRecord {
  /** The run id. */
  runId: string;
  /** The conversation the run belongs to, if any. */
  conversationId?: string;
  /** The current status. */
  status: RunStatus;
  /** The run's secret-free config. */
  config: Record<string, unknown>;
  /** The first input's text, whole (secret-free), if it had text. */
  prompt?: string;
  /** The failure code, once failed or cancelled. */
  code?: string;
  /** The failure message, once failed or cancelled. */
  error?: string;
  /** Milliseconds since the epoch. */
  createdAt: number;
  /** Milliseconds since the epoch. */
  updatedAt: number;
  /** Milliseconds since the epoch, once the run ended. */
  finishedAt?: number;
  /** What the agent reported, once the run ended (none: it reported nothing). */
  usage?: RunUsage;
}

/** A finished run with its events, as {@linkcode RunStore.importRuns} stores it. */
export interface ImportedRun {
  /** The run as it was stored where it ran (a final status). */
  record: RunRecord & { status: FinalRunStatus };
  /** Its events, ordered by sequence, already stripped of secrets. */
  events: RunEvent[];
}

/** Why {@linkcode RunStore.importRuns} wrote nothing. */
export type ImportConflict =
  | {
    /** Some of the runs' ids are stored already. */
    kind: "runs";
    /** Those ids. */
    runIds: string[];
  }
  | {
    /** The runs' conversation already has runs or sessions in this store. */
    kind: "conversation";
    /** Its id. */
    conversationId: string;
  };

/** Filters for {@linkcode RunStore.listRuns}. */
export interface ListRunsOptions {
  /** Only runs of this conversation. */
  conversationId?: string;
  /** Only runs with this status. */
  status?: RunStatus;
  /** Only runs whose config names this `daemon-id`. */
  daemonId?: string;
  /** Only runs older than this run (the last of the previous page). */
  before?: string;
  /** At most this many runs. */
  limit: number;
}

/** Filters for {@linkcode RunStore.getEvents}. */
export interface GetEventsOptions {
  /** Only events with a sequence greater than this. */
  after?: number;
  /** At most this many events (default: all). */
  limit?: number;
}

/**
 * Which runs {@linkcode RunStore.pruneRuns} deletes: finished runs (never an
 * active one) that are older than `createdBefore` or not among the newest
 * `keepNewest` runs, oldest first. Sessions are never deleted.
 */
export interface PruneRunsOptions {
  /** Finished runs created before this time (ms since the epoch) go. */
  createdBefore?: number;
  /** Finished runs past the newest this many (active ones counted) go. */
  keepNewest?: number;
  /** At most this many runs (with their events) in one call. */
  limit: number;
}

/** What one {@linkcode RunStore.pruneRuns} call deleted. */
export interface PrunedRuns {
  /** Runs deleted. */
  runs: number;
  /** Their events deleted. */
  events: number;
}

/** Whether the store can serve, as {@linkcode RunStore.health} reports it. */
export interface StoreHealth {
  /**
   * False while reads or writes fail (until a write succeeds again), and for
   * good once the store file is found damaged.
   */
  ok: boolean;
  /** The last failure, when not ok. */
  error?: string;
}

/**
 * Session ids, runs and run events, behind an interface a networked database
 * also implements: reads and writes are asynchronous, except
 * {@linkcode RunStore.appendEvent}, which only queues (writes are batched).
 */
export interface RunStore {
  /** The stored session for exactly this key, if any. */
  getSession(key: SessionKey): Promise<StoredSession | undefined>;
  /** Stores (or replaces) the session id for this key. */
  putSession(key: SessionKey, sessionId: string): Promise<void>;
  /**
   * Replaces the session config values remembered with this key's stored
   * session (its id stays); does nothing when no session is stored for it.
   */
  putSessionSettings(
    key: SessionKey,
    settings: Record<string, unknown>,
  ): Promise<void>;
  /**
   * Remembers `cost` as the running cost of session `sessionId` (it counts
   * only while that session is the key's); does nothing when no session is
   * stored for the key.
   */
  putSessionCost(
    key: SessionKey,
    sessionCost: { sessionId: string; cost: UsageCost },
  ): Promise<void>;
  /** Forgets every session of a conversation; resolves to how many were removed. */
  deleteSessions(conversationId: string): Promise<number>;
  /** Every session of a conversation, most recently stored first. */
  listSessions(conversationId: string): Promise<SessionRecord[]>;

  /** Records a run that has just started (owned by this store's process or replica). */
  createRun(run: NewRun): Promise<void>;
  /**
   * Records how an active run ended (queued events are flushed first).
   * Resolves to false when the run is unknown or already ended; the first end wins.
   */
  finishRun(runId: string, outcome: RunOutcome): Promise<boolean>;
  /**
   * Stores finished runs brought from another runner (a transcript), with
   * their events, all in one transaction and owned by nobody. When any of
   * their ids is already stored, or their conversation already has a run or
   * a session here, nothing is written: resolves to why (undefined: all
   * stored). Imported runs never join a conversation of this store: they
   * would become its latest run (warm reuse, the history a load replays).
   */
  importRuns(runs: readonly ImportedRun[]): Promise<ImportConflict | undefined>;
  /** One run, if it exists. */
  getRun(runId: string): Promise<RunRecord | undefined>;
  /** Runs, newest first. */
  listRuns(options: ListRunsOptions): Promise<RunRecord[]>;

  /**
   * Queues one event for the run's log and returns it as stored: `run_id`
   * set, `sequence` assigned (next after the run's last) unless given,
   * `timestamp` defaulted to now. Writes are batched (a group commit: the
   * events queued while one batch commits form the next); an event whose
   * sequence is already stored is ignored. A networked store assigns
   * sequences only for runs it created, appended to or read the events of.
   */
  appendEvent(runId: string, event: RunEvent): RunEvent;
  /** Writes queued events now, in one transaction. */
  flush(): Promise<void>;
  /**
   * Resolves once every event queued so far is committed — durable: it
   * survives a kill -9 of this process — without forcing a commit of its
   * own. While writes fail it keeps waiting (the events stay queued and are
   * retried); it rejects only when the store closes with them unwritten.
   */
  durable(): Promise<void>;
  /**
   * A run's stored events ordered by sequence (queued events are flushed
   * first; while writes fail, the queued ones are not shown).
   */
  getEvents(runId: string, options?: GetEventsOptions): Promise<RunEvent[]>;

  /**
   * Ends every run the store shows as active whose owner is gone (a crashed,
   * restarted or zombie process, or one whose pid another process reuses; in
   * a fleet, a replica whose lease expired): marks it failed with `code` and
   * `message` and appends a final `run.failed` event — unless the run's
   * terminal event is already stored, whose outcome is then recorded instead
   * (a run never holds two) — exactly once however many callers race. Runs
   * owned by a live owner (another `runner run`, a store still open in this
   * process, a live replica) are left alone; `runId` limits it to one run.
   * Resolves to the ids of the runs it ended.
   */
  markActiveRunsFailed(
    code: ErrorCode,
    message: string,
    options?: { runId?: string },
  ): Promise<string[]>;

  /**
   * Deletes one batch of the runs `options` selects, with their events, in
   * one transaction; a networked store's concurrent callers skip each
   * other's rows. The embedded store hands the freed pages back to the file
   * system. Resolves to what it deleted (fewer runs than `limit`: nothing
   * more to delete).
   */
  pruneRuns(options: PruneRunsOptions): Promise<PrunedRuns>;

  /** The store's size in bytes (the SQLite file's pages; PostgreSQL: the database). */
  size(): Promise<number>;

  /** Whether reads and writes currently succeed (and the file is intact). */
  health(): Promise<StoreHealth>;

  /** Flushes queued events and closes the store. Safe to call twice. */
  close(): Promise<void>;

  /** The fleet's shared state, when replicas share this store (PostgreSQL). */
  readonly fleet?: FleetStore;

  /**
   * In a fleet: calls `listener` once when this replica may no longer write
   * the run (its lease lapsed or the fleet declared it lost; the run's end is
   * the fleet's from then on). Resolves to a function that stops watching.
   * Stores without fencing (SQLite) leave it out.
   */
  watchFence?(runId: string, listener: () => void): () => void;
}

/**
 * The synchronous shape of {@linkcode RunStore} that the embedded SQLite
 * store implements (`node:sqlite` is synchronous; only waiting for a commit
 * stays a promise); `open.ts` wraps it.
 */
export type SyncRunStore = {
  [K in keyof RunStore]: K extends "durable" ? RunStore[K]
    : RunStore[K] extends (...args: infer A) => Promise<infer R>
      ? (...args: A) => R
    : RunStore[K];
};

/** Options for {@linkcode openStore}. */
export interface OpenStoreOptions {
  /** The directory that holds the store file; created when missing. */
  dataDir: string;
  /**
   * Whether the process recorded as `pid` (started at `startTime`, when
   * known) is still alive; decides which active runs
   * {@linkcode RunStore.markActiveRunsFailed} may end. Defaults to the
   * process table: a gone pid, a zombie or a reused pid counts as dead.
   */
  isProcessAlive?: (pid: number, startTime?: string) => boolean;
  /**
   * Checks the SQLite file's pages at open (`PRAGMA quick_check`, about a
   * second per 100 MB) and reports the store unhealthy for good when it is
   * damaged; `runner serve` does.
   */
  checkIntegrity?: boolean;
  /**
   * Converts an SQLite file written without incremental vacuum, so pruned
   * runs give their space back (a one-off `VACUUM`, which rewrites the
   * file); `runner serve` does. New files always have it.
   */
  reclaimSpace?: boolean;
  /** How long a write waits for another process's lock, in ms (default 5000). */
  busyTimeoutMs?: number;
  /** Called when a background event flush fails (events stay queued and are retried). */
  onFlushError?: (error: RunnerError) => void;
  /** Structured log of what opening found and did (a damaged file, a conversion). */
  log?: (entry: Record<string, unknown>) => void;
  /** Opens the fleet's shared PostgreSQL store instead of the data directory's SQLite file. */
  shared?: SharedStoreOptions;
}
