/**
 * How `runner serve` listens: the open-file limit and the connection cap
 * fitted under it, the HTTP listener with its limits, and a guard that logs
 * stray promise rejections instead of dying of them.
 *
 * @module
 */

import { RunnerError } from "../../errors.ts";
import type { Logger } from "../../log.ts";
import type { ServeConfig } from "../../server/config/serve_config.ts";
import { bridgeRequest } from "../../net/node_bridge.ts";
import {
  type ConnectionLimits,
  type HttpListener,
  startHttpListener,
} from "../../net/http_listener.ts";
import { fitConnectionCap, raiseFileLimit } from "./file_limit.ts";
import { consoleLine } from "./api_token.ts";
import { handleUpgrade } from "./acp_upgrade.ts";

/** Silence on an `/acp` WebSocket after which it is pinged, then closed, in ms. */
const ACP_WEBSOCKET_IDLE_MS = 30_000;

/** The `http://host:port` of a listen address. */
export function listenUrl(hostname: string, port: number): string {
  return `http://${
    hostname.includes(":") ? `[${hostname}]` : hostname
  }:${port}`;
}

/** The listener's limits, in milliseconds. */
function connectionLimits(config: ServeConfig): ConnectionLimits {
  const { limits } = config;
  return {
    maxConnections: limits.maxConnections,
    headerTimeoutMs: limits.headerTimeout * 1000,
    requestTimeoutMs: limits.requestTimeout * 1000,
    keepAliveTimeoutMs: limits.keepAliveTimeout * 1000,
  };
}

/**
 * Raises the open-file limit where possible and fits the connection cap
 * under it (logged when lowered).
 */
export async function fitLimits(
  config: ServeConfig,
  log: Logger,
): Promise<void> {
  const limit = await raiseFileLimit();
  if (limit.raisedFrom !== undefined || limit.note) {
    log({
      msg: "open-file limit",
      soft: limit.soft,
      hard: limit.hard,
      raised_from: limit.raisedFrom,
      note: limit.note,
      level: limit.note ? "warn" : "info",
    });
  }
  const cap = fitConnectionCap(config.limits.maxConnections, limit);
  if (cap < config.limits.maxConnections) {
    log({
      msg: "max-connections lowered to fit the open-file limit",
      level: "warn",
      wanted: config.limits.maxConnections,
      max_connections: cap,
      open_file_limit: limit.soft,
    });
    config.limits.maxConnections = cap;
  }
}

/** Starts the HTTP listener; throws `config.invalid` when it cannot listen. */
export function listen(
  config: ServeConfig,
  handler: (request: Request) => Response | Promise<Response>,
  log: Logger,
): HttpListener {
  const onError = (error: unknown) =>
    log({
      msg: "request failed",
      level: "error",
      error: error instanceof Error ? error.message : String(error),
    });
  const origin = listenUrl(config.host, config.port || 80);
  let listener: HttpListener;
  try {
    listener = startHttpListener({
      hostname: config.host,
      port: config.port,
      limits: connectionLimits(config),
      log,
      onRequest: (request, response) =>
        void bridgeRequest(request, response, {
          handler,
          origin,
          onError,
          errorResponse: internalErrorResponse,
        }),
      // WebSockets of `/acp`: judged by the app, finished here.
      onUpgrade: (request, socket, head) =>
        void handleUpgrade(request, socket, head, {
          handler,
          origin,
          maxMessageBytes: config.maxBodyMb * 1024 * 1024,
          idleTimeoutMs: ACP_WEBSOCKET_IDLE_MS,
        }),
      onError: (message, error) =>
        log({
          msg: message,
          level: "error",
          error: error instanceof Error ? error.message : String(error),
        }),
    });
  } catch (error) {
    throw new RunnerError(
      "config.invalid",
      `Cannot listen on ${config.host}:${config.port} (${
        error instanceof Error ? error.message : error
      }). Choose another --host/--port.`,
    );
  }
  log({
    msg: "listening",
    always: true,
    url: listenUrl(config.host, listener.port),
  });
  announceConsole(config, listener.port, log);
  return listener;
}

/**
 * Prints the console's URL on stdout (with the kept token: the one place it shows in
 * full, never through the log); warns when the API takes no token.
 */
function announceConsole(config: ServeConfig, port: number, log: Logger): void {
  if (!config.apiToken) {
    log({
      msg:
        "serving without an API token (--loopback-without-token): any process on this machine may start, steer, approve and read runs",
      level: "warn",
      always: true,
    });
  }
  const line = consoleLine(config, listenUrl(config.host, port));
  // On stdout: stderr is the log, JSON lines only when --log-format json.
  try {
    Deno.stdout.writeSync(new TextEncoder().encode(`${line}\n`));
  } catch { /* stdout closed: runner token --show prints the token */ }
}

function internalErrorResponse(): Response {
  return Response.json(
    {
      error: {
        code: "runner.internal",
        message: "Internal error.",
        retryable: true,
      },
    },
    { status: 500 },
  );
}

/**
 * Logs a promise rejection nobody handled instead of letting it end the
 * process (an active run's stream would end without its terminal event).
 */
export function catchStrayRejections(log: Logger): () => void {
  const onRejection = (event: PromiseRejectionEvent) => {
    event.preventDefault();
    const reason = event.reason;
    log({
      msg: "unhandled rejection",
      level: "error",
      error: reason instanceof Error ? reason.message : String(reason),
    });
  };
  globalThis.addEventListener("unhandledrejection", onRejection);
  return () =>
    globalThis.removeEventListener("unhandledrejection", onRejection);
}
