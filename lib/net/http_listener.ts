/**
 * A `node:http` server that holds up against hostile connections and bursts:
 * connections come from the shared accept loop (`tcp_listener.ts`: at most
 * `maxConnections`, the oldest idle one closed to make room for a new one,
 * a clean `503` only when every one is busy, and accept errors such as running
 * out of file descriptors never stop it), with a bound on the time to send a
 * request's head and its body, an idle bound between keep-alive requests, and
 * no socket error that can reject unhandled. Shared by the HTTP API, the
 * assets endpoints and the daemon's MCP proxy. See `docs/http-api.md`
 * ("Limits").
 *
 * @module
 */

import http from "node:http";
import type { Duplex } from "node:stream";
import type { Logger } from "../log.ts";
import { ConnSocket } from "./conn_socket.ts";
import { type ListenerStats, listenTcp, type Slot } from "./tcp_listener.ts";

export type { ListenerStats } from "./tcp_listener.ts";

/** Connection limits of a listener. */
export interface ConnectionLimits {
  /** Open sockets at most; past it the oldest idle one is closed, or the new one refused. */
  maxConnections: number;
  /** Time to send a complete request head, in ms. */
  headerTimeoutMs: number;
  /** Time to send a complete request (head and body), in ms. */
  requestTimeoutMs: number;
  /** Idle time allowed between two requests on one connection, in ms. */
  keepAliveTimeoutMs: number;
}

/** Options of {@linkcode startHttpListener}. */
export interface HttpListenerOptions {
  /** The listen address. */
  hostname: string;
  /** The listen port (0: any free port). */
  port: number;
  /** The connection limits. */
  limits: ConnectionLimits;
  /** What the listener is, in log lines (default `http`). */
  name?: string;
  /** Answers a request (must not throw). */
  onRequest(request: http.IncomingMessage, response: http.ServerResponse): void;
  /** Takes over an `Upgrade` request's socket; without it upgrades are refused. */
  onUpgrade?(
    request: http.IncomingMessage,
    socket: Duplex,
    head: Uint8Array,
  ): void;
  /** Receives failures of the listener and of sockets. */
  onError(message: string, error: unknown): void;
  /** Where the connection cap and accept failures are logged. */
  log?: Logger;
}

/** A listening {@linkcode startHttpListener}. */
export interface HttpListener {
  /** The bound address. */
  hostname: string;
  /** The bound port. */
  port: number;
  /** Sockets open now. */
  connections(): number;
  /** What the listener has done (for `/metrics`). */
  stats(): ListenerStats;
  /** Stops accepting, closes idle sockets, and waits up to `graceMs` for the rest. */
  close(graceMs?: number): Promise<void>;
}

/** A raw HTTP answer with the JSON error body, for sockets no handler sees. */
export function rawErrorResponse(
  status: number,
  reason: string,
  error: { code: string; message: string; retryable: boolean },
): string {
  const body = JSON.stringify({ error });
  return `HTTP/1.1 ${status} ${reason}\r\nconnection: close\r\n` +
    `content-type: application/json\r\n` +
    `content-length: ${new TextEncoder().encode(body).length}\r\n\r\n${body}`;
}

const TOO_MANY_CONNECTIONS = rawErrorResponse(503, "Service Unavailable", {
  code: "http.too_many_connections",
  message:
    "The server holds as many connections as it accepts (--max-connections); retry shortly.",
  retryable: true,
});

const REQUEST_TIMEOUT = rawErrorResponse(408, "Request Timeout", {
  code: "http.request_timeout",
  message:
    "The request was not received in time (--header-timeout, --request-timeout); send it again, at once.",
  retryable: true,
});

const BAD_REQUEST = rawErrorResponse(400, "Bad Request", {
  code: "http.bad_request",
  message: "The request is not valid HTTP/1.1.",
  retryable: false,
});

/** Ends a socket with a raw answer, then destroys it once that is out (within 1 s). */
function refuse(socket: Duplex, answer: string): void {
  const timer = setTimeout(() => socket.destroy(), 1000);
  Deno.unrefTimer(timer);
  socket.once("close", () => clearTimeout(timer));
  try {
    if (socket.writable) socket.end(answer, () => socket.destroy());
    else socket.destroy();
  } catch {
    socket.destroy();
  }
}

/** What the listener knows of one open socket. */
interface SocketState {
  /** Its place under the connection cap. */
  slot: Slot;
  /** Requests it is answering now. */
  busy: number;
  /** Requests it has answered. */
  answered: number;
  /** Bytes it had sent when its last answer ended. */
  readAtIdle: number;
  /** Closed to make room for a newer connection. */
  evicted: boolean;
}

/** The sockets of one listener, and whether it is closing. */
interface Sockets {
  open: Map<ConnSocket, SocketState>;
  closing: boolean;
}

/** Starts listening (bound before it returns); throws when the address cannot be bound. */
export function startHttpListener(
  options: HttpListenerOptions,
): HttpListener {
  const { limits } = options;
  const server = http.createServer({
    headersTimeout: limits.headerTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    connectionsCheckingInterval: Math.max(
      50,
      Math.min(1000, limits.headerTimeoutMs / 4),
    ),
  });
  const sockets: Sockets = { open: new Map(), closing: false };
  const tcp = listenTcp({
    hostname: options.hostname,
    port: options.port,
    maxConnections: limits.maxConnections,
    name: options.name ?? "http",
    refusal: new TextEncoder().encode(TOO_MANY_CONNECTIONS),
    log: options.log,
    onConnection: (slot) => serveSocket(server, sockets, slot),
  });
  // The server never listens itself: it counts as listening until closed (or
  // it ends every keep-alive connection after one answer), and this event
  // starts its header and request timeouts.
  Object.defineProperty(server, "listening", { get: () => !sockets.closing });
  server.emit("listening");
  handleServerEvents(server, sockets, options);
  return {
    hostname: tcp.hostname,
    port: tcp.port,
    connections: () => sockets.open.size,
    stats: () => tcp.stats(),
    async close(graceMs = 5000) {
      sockets.closing = true;
      await tcp.close();
      await closeSockets(server, sockets.open, graceMs);
    },
  };
}

/** Hands an accepted connection to the server; returns how to evict it. */
function serveSocket(
  server: http.Server,
  sockets: Sockets,
  slot: Slot,
): () => Promise<void> {
  const socket = new ConnSocket(slot.conn);
  const state: SocketState = {
    slot,
    busy: 0,
    answered: 0,
    readAtIdle: 0,
    evicted: false,
  };
  sockets.open.set(socket, state);
  socket.on("error", () => {}); // resets of hostile clients are routine
  socket.once("close", () => {
    sockets.open.delete(socket);
    slot.release();
  });
  socket.setNoDelay(true);
  server.emit("connection", socket);
  return () => evict(socket, state);
}

/**
 * Closes an idle socket to make room, silently between requests and else
 * with a 503; resolves once its descriptor is free.
 */
function evict(socket: ConnSocket, state: SocketState): Promise<void> {
  state.evicted = true;
  socket.linger = false; // many may go at once: each must free its descriptor now
  const between = state.answered > 0 && socket.bytesRead === state.readAtIdle;
  if (between) socket.destroy();
  else refuse(socket, TOO_MANY_CONNECTIONS);
  return socket.released;
}

/** Requests (which make a socket busy until answered), upgrades and client errors. */
function handleServerEvents(
  server: http.Server,
  sockets: Sockets,
  options: HttpListenerOptions,
): void {
  server.on("request", (request, response) => {
    const socket = request.socket as unknown as ConnSocket;
    const state = sockets.open.get(socket);
    // An evicted socket has its 503 on the way and closes once it is out.
    if (!state || state.evicted) return;
    state.busy++;
    state.slot.busy();
    response.once("close", () => {
      state.busy--;
      state.answered++;
      if (state.busy > 0) return;
      state.readAtIdle = socket.bytesRead;
      state.slot.idle();
      // While closing, a connection ends once its last answer is out.
      if (sockets.closing) socket.end();
    });
    options.onRequest(request, response);
  });
  server.on("upgrade", (request, socket, head) => {
    const state = sockets.open.get(socket as ConnSocket);
    if (state?.evicted) return;
    if (!options.onUpgrade) return refuse(socket, BAD_REQUEST);
    state?.slot.busy();
    options.onUpgrade(request, socket, head);
  });
  server.on("clientError", (error: NodeJS.ErrnoException, socket: Duplex) => {
    const timedOut = error.code === "ERR_HTTP_REQUEST_TIMEOUT";
    refuse(socket, timedOut ? REQUEST_TIMEOUT : BAD_REQUEST);
  });
  server.on("error", (error) => options.onError("listener failed", error));
}

/**
 * Ends idle connections at once and busy ones as their answers finish, and
 * destroys whatever is left after `graceMs`.
 */
async function closeSockets(
  server: http.Server,
  sockets: Map<ConnSocket, SocketState>,
  graceMs: number,
): Promise<void> {
  // Stops the server's timeout checks (it was never listening itself).
  server.close(() => {});
  const allClosed = () =>
    Promise.all(
      [...sockets.keys()].map((socket) =>
        new Promise<void>((resolve) => {
          if (socket.destroyed) return resolve();
          socket.once("close", () => resolve());
        })
      ),
    );
  for (const [socket, state] of sockets) if (state.busy === 0) socket.end();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const grace = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, graceMs);
  });
  await Promise.race([allClosed(), grace]);
  clearTimeout(timer);
  for (const socket of sockets.keys()) socket.destroy();
  await allClosed();
}
