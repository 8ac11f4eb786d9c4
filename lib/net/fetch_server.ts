/**
 * A small local HTTP endpoint for a fetch-style handler (a Hono app) on the
 * hardened listener (`http_listener.ts`), for the assets bridge and gateway
 * and the daemon's per-job MCP proxy: a burst of connections cannot make it
 * stop accepting or lock its agent out, as `Deno.serve` can (it gives up on
 * the first accept that runs out of file descriptors).
 *
 * @module
 */

import type { Logger } from "../log.ts";
import {
  type ConnectionLimits,
  type ListenerStats,
  startHttpListener,
} from "./http_listener.ts";
import { bridgeRequest, type FetchHandler } from "./node_bridge.ts";

/** The limits of a local endpoint: a few agents are its clients. */
export const LOCAL_ENDPOINT_LIMITS: ConnectionLimits = {
  maxConnections: 128,
  headerTimeoutMs: 10_000,
  requestTimeoutMs: 300_000,
  keepAliveTimeoutMs: 5_000,
};

/** How long a closing endpoint lets answers in progress finish. */
const CLOSE_GRACE_MS = 1000;

/** Options of {@linkcode serveFetch}. */
export interface FetchServerOptions {
  /** The listen address (default 127.0.0.1). */
  hostname?: string;
  /** The listen port (default 0: any free port). */
  port?: number;
  /** What the endpoint is, in log lines. */
  name: string;
  /** Where failures and the connection cap are logged. */
  log?: Logger;
}

/** A running {@linkcode serveFetch}. */
export interface FetchServer {
  /** The bound address. */
  hostname: string;
  /** The bound port. */
  port: number;
  /** What the listener has done. */
  stats(): ListenerStats;
  /** Stops accepting and ends the connections (answers in progress get a moment). */
  close(): Promise<void>;
}

function internalError(): Response {
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

/** Serves `handler` (bound before it returns; throws when it cannot bind). */
export function serveFetch(
  handler: FetchHandler,
  options: FetchServerOptions,
): FetchServer {
  const onError = (message: string, error: unknown) =>
    options.log?.({
      msg: message,
      level: "error",
      listener: options.name,
      error: error instanceof Error ? error.message : String(error),
    });
  const hostname = options.hostname ?? "127.0.0.1";
  let origin = "http://127.0.0.1";
  const listener = startHttpListener({
    hostname,
    port: options.port ?? 0,
    limits: LOCAL_ENDPOINT_LIMITS,
    name: options.name,
    log: options.log,
    onRequest: (request, response) =>
      void bridgeRequest(request, response, {
        handler,
        origin,
        onError: (error) => onError("request failed", error),
        errorResponse: internalError,
      }),
    onError,
  });
  const host = listener.hostname.includes(":")
    ? `[${listener.hostname}]`
    : listener.hostname;
  origin = `http://${host}:${listener.port}`;
  let closed: Promise<void> | undefined;
  return {
    hostname: listener.hostname,
    port: listener.port,
    stats: () => listener.stats(),
    close: () => closed ??= listener.close(CLOSE_GRACE_MS),
  };
}
