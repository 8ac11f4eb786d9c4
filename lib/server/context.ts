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
import { redactSecrets } from "../secrets.ts";
import type { ServeConfig } from "./config.ts";
import type { RunStore } from "../store/types.ts";
import type { FleetRouter } from "./fleet_router.ts";

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
}

/** What the HTTP API shows of the daemon hub (in a fleet: of every replica's). */
export interface DaemonsView {
  /** Connected and fenced daemons. */
  list(): Promise<{ daemons: Record<string, unknown>[] }>;
  /** Lifts a fence; true when the id was fenced. */
  unfence(daemonId: string): Promise<boolean>;
}

/** What every route module gets. */
export interface ServerContext
  extends Required<Omit<ServerAppOptions, "secrets" | "daemons" | "stopping">> {
  daemons?: DaemonsView;
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
  "http.not_found": 404,
  "http.conflict": 409,
  "http.conversation_busy": 409,
  "http.body_too_large": 413,
  "http.too_many_runs": 429,
  "agent_runtime.daemon_fenced": 409,
  "runner.replica_unreachable": 503,
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

/** The 401 answer (no detail about what was wrong). */
export function unauthorized(scheme = "Bearer"): RunnerError {
  return new RunnerError("http.unauthorized", "Unauthorized.", {
    detail: { scheme },
  });
}

/** Reads a JSON object body, or throws `http.bad_request`. */
export async function readJsonObject(
  c: Context,
): Promise<Record<string, unknown>> {
  const text = await c.req.text();
  if (!text.trim()) return {};
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
