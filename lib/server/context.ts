/**
 * What every route module of the HTTP service shares: the app's options, the
 * per-app context handed to each route group, the failure → status table, the
 * one error shape, and small request helpers.
 *
 * @module
 */

import { createHash, timingSafeEqual } from "node:crypto";
import type { Context } from "hono";
import { type ErrorCode, RunnerError } from "../errors.ts";
import type { Logger } from "../log.ts";
import type { Metrics } from "./metrics.ts";
import type { RunManager, StartOutcome } from "../run/manager.ts";
import type { RunRequest } from "../run/request.ts";
import type { WarmAgentsView } from "../run/warm/pool.ts";
import { redactSecrets } from "../secrets.ts";
import type { ServeConfig } from "./config/serve_config.ts";
import type { RunStore } from "../store/types.ts";
import type { FleetRouter } from "./fleet_router.ts";
import type { TargetDescriber } from "./acp/target.ts";

/** Options for {@linkcode createServerApp}. */
export interface ServerAppOptions {
  /** Starts and tracks runs. */
  manager: RunManager;
  /** Runs, events and sessions. */
  store: RunStore;
  /** The server settings (auth, limits, run defaults and policy). */
  config: ServeConfig;
  /** The metrics registry. */
  metrics: Metrics;
  /** Structured log (already redacting). */
  log?: Logger;
  /** Values never returned in a response (tokens, env-json values). */
  secrets?: string[];
  /** Whether the server is shutting down (new runs are refused). */
  isShuttingDown?: () => boolean;
  /** The daemon hub's view, when `--daemon-enabled`. */
  daemons?: DaemonsView;
  /** Aborted when the server stops: ends requests forwarded to other replicas. */
  stopping?: AbortSignal;
  /** The warm pool (`GET`/`DELETE /v1/agents`, `/metrics`). */
  warmAgents?: WarmAgentsView;
  /** Live events held per stream reader before it catches up from the store. */
  maxPendingEvents?: number;
  /** Learns what a target agent answers to `initialize`, for `/acp` (absent: nothing learned). */
  describeAcpTarget?: TargetDescriber;
}

/** What the HTTP API shows of the daemon hub (in a fleet: of every replica's). */
export interface DaemonsView {
  /** Connected and fenced daemons. */
  list(): Promise<{ daemons: Record<string, unknown>[] }>;
  /** Lifts a fence; true when the id was fenced. */
  unfence(daemonId: string): Promise<boolean>;
}

/** What every route module gets. */
export interface ServerContext extends
  Required<
    Omit<
      ServerAppOptions,
      | "secrets"
      | "daemons"
      | "stopping"
      | "warmAgents"
      | "maxPendingEvents"
      | "describeAcpTarget"
    >
  > {
  daemons?: DaemonsView;
  /** The warm pool, when the runner keeps one. */
  warmAgents?: WarmAgentsView;
  /** Live events held per stream reader (default: the stream's own). */
  maxPendingEvents?: number;
  /** Routes requests to the replica owning them, when this replica is in a fleet. */
  fleet?: FleetRouter;
  /** Values never returned in a response. */
  secrets: string[];
  /** Starts a run (or steers) after the shutdown and concurrency checks. */
  startRun(
    request: RunRequest,
    options?: { steer?: boolean },
  ): Promise<StartOutcome>;
  /** Redacts secrets from a response value. */
  redact<T>(value: T): T;
}

const STATUS_BY_CODE: Partial<Record<ErrorCode, number>> = {
  "config.invalid": 400,
  "http.bad_request": 400,
  "provider.unknown": 400,
  "provider.not_supported": 400,
  "prompt.attachment_invalid": 400,
  "prompt.attachment_too_large": 413,
  "http.unauthorized": 401,
  "http.forbidden": 403,
  "http.host_not_allowed": 403,
  "http.origin_not_allowed": 403,
  "http.unsupported_media_type": 415,
  "http.request_timeout": 408,
  "http.too_many_connections": 503,
  "http.not_found": 404,
  "http.conflict": 409,
  "http.conversation_busy": 409,
  "http.body_too_large": 413,
  "http.too_many_runs": 429,
  "agent_runtime.daemon_fenced": 409,
  "runner.replica_unreachable": 503,
  "runner.lease_lost": 503,
  "run.steering_queue_full": 429,
  "runner.shutting_down": 503,
  "store.unavailable": 503,
};

/** The HTTP status for a failure code. */
export function statusOf(code: ErrorCode): number {
  return STATUS_BY_CODE[code] ?? 500;
}

/** The JSON error response for a failure, secrets redacted. */
export function errorResponse(
  error: RunnerError,
  secrets: string[] = [],
  headers?: HeadersInit,
): Response {
  return Response.json(
    {
      error: {
        code: error.code,
        message: redactSecrets(error.message, secrets),
        retryable: error.retryable,
      },
    },
    { status: statusOf(error.code), headers },
  );
}

/** Compares two strings in time independent of where they differ. */
export function safeEqual(given: string, expected: string): boolean {
  const digest = (text: string) => createHash("sha256").update(text).digest();
  return timingSafeEqual(digest(given), digest(expected));
}

/** The message of a run whose owning process is gone. */
export const ORPHANED_RUN_MESSAGE =
  "The runner stopped while this run was active; start the run again.";

/** The message of runs failed because their replica was lost. */
export const REPLICA_LOST_MESSAGE =
  "The replica running this run stopped renewing its lease (it died or lost the database); start the run again on any replica.";

/** What {@linkcode failOrphanedRuns} ends and where it says so. */
export interface OrphanedRunsOptions {
  /** Only this run (default: every active run). */
  runId?: string;
  /** Logs the runs it ended (one line, with their ids). */
  log?: (entry: Record<string, unknown>) => void;
}

/**
 * Ends active runs whose owner is gone: with `runner.restarted` when its
 * process is gone (crashed, a zombie, or a reused pid), or in a fleet with
 * `runner.replica_lost` when its replica's lease lapsed; all of them, or only
 * `runId`. Store failures are left to the caller's next read.
 */
export async function failOrphanedRuns(
  store: RunStore,
  { runId, log }: OrphanedRunsOptions = {},
): Promise<string[]> {
  let ended: string[];
  try {
    ended = store.fleet
      ? await store.markActiveRunsFailed(
        "runner.replica_lost",
        REPLICA_LOST_MESSAGE,
        { runId },
      )
      : await store.markActiveRunsFailed(
        "runner.restarted",
        ORPHANED_RUN_MESSAGE,
        { runId },
      );
  } catch {
    return [];
  }
  if (ended.length) {
    log?.({
      msg: store.fleet
        ? "failed runs of a lost replica"
        : "ended runs of a gone process",
      run_ids: ended,
    });
  }
  return ended;
}

/** When each store's runs were last checked for a gone owner while followed. */
const orphanChecks = new WeakMap<RunStore, Map<string, number>>();

/** How often one followed run's owner is looked at, however many read it. */
const ORPHAN_CHECK_MS = 1000;

/**
 * {@linkcode failOrphanedRuns} for one run that streams are polling, at most
 * once a second per run (each check may ask the process table).
 */
export async function failIfOrphaned(
  store: RunStore,
  runId: string,
  log?: (entry: Record<string, unknown>) => void,
): Promise<void> {
  let checked = orphanChecks.get(store);
  if (!checked) orphanChecks.set(store, checked = new Map());
  const now = Date.now();
  if (now - (checked.get(runId) ?? 0) < ORPHAN_CHECK_MS) return;
  if (checked.size > 1000) {
    for (const [id, at] of checked) {
      if (now - at > 60_000) checked.delete(id);
    }
  }
  checked.set(runId, now);
  if ((await failOrphanedRuns(store, { runId, log })).length) {
    checked.delete(runId);
  }
}

/** The 401 answer (no detail about what was wrong). */
export function unauthorized(scheme = "Bearer"): RunnerError {
  return new RunnerError("http.unauthorized", "Unauthorized.", {
    detail: { scheme },
  });
}

/** Whether a `Content-Type` names JSON (`application/json`, `…+json`). */
export function isJsonContentType(value: string | undefined): boolean {
  const type = (value ?? "").split(";")[0].trim().toLowerCase();
  return type === "application/json" ||
    /^application\/[a-z0-9.+-]+\+json$/.test(type);
}

/**
 * Reads a JSON object body, or throws `http.bad_request`; a body sent as
 * anything but JSON is `http.unsupported_media_type` (browsers may send
 * `text/plain` and form bodies across sites without asking first).
 */
export async function readJsonObject(
  c: Context,
): Promise<Record<string, unknown>> {
  const text = await c.req.text();
  if (!text.trim()) return {};
  if (!isJsonContentType(c.req.header("content-type"))) {
    throw new RunnerError(
      "http.unsupported_media_type",
      "The request body must be sent as JSON: set Content-Type: application/json.",
    );
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new RunnerError(
      "http.bad_request",
      "The request body is not valid JSON. Send a JSON object.",
    );
  }
  if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) {
    throw new RunnerError(
      "http.bad_request",
      "The request body must be a JSON object.",
    );
  }
  return parsed as Record<string, unknown>;
}
