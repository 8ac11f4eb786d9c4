/**
 * A `node:http` listener that holds up against hostile connections: at most
 * `maxConnections` open sockets (one more gets a clean `503` and is closed),
 * a bound on the time to send a request's head and its body, an idle bound
 * between keep-alive requests, and no accept or socket error that can reject
 * unhandled. Shared by the HTTP API and the daemon hub. See
 * `docs/http-api.md` ("Limits").
 *
 * @module
 */

import http from "node:http";
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";

/** Connection limits of a listener. */
export interface ConnectionLimits {
  /** Open sockets at most; one more is answered `503` and closed. */
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
}

/** A listening {@linkcode startHttpListener}. */
export interface HttpListener {
  /** The bound address. */
  hostname: string;
  /** The bound port. */
  port: number;
  /** Sockets open now. */
  connections(): number;
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

/** Ends a socket with a raw answer, then destroys it shortly after. */
function refuse(socket: Duplex, answer: string): void {
  try {
    if (socket.writable) socket.end(answer);
  } catch { /* already gone */ }
  setTimeout(() => socket.destroy(), 1000).unref?.();
}

/** Starts listening; throws when the address cannot be bound. */
export async function startHttpListener(
  options: HttpListenerOptions,
): Promise<HttpListener> {
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
  /** Open sockets, with how many requests each is answering. */
  const sockets = new Map<Socket, number>();
  const refused = new WeakSet<Socket>();
  let closing = false;
  // Runs before http's own connection handler: count, or refuse cleanly.
  server.prependListener("connection", (socket: Socket) => {
    socket.on("error", () => {}); // resets of hostile clients are routine
    if (sockets.size >= limits.maxConnections) {
      refused.add(socket);
      refuse(socket, TOO_MANY_CONNECTIONS);
      return;
    }
    sockets.set(socket, 0);
    socket.setNoDelay(true);
    socket.once("close", () => sockets.delete(socket));
  });
  server.on("request", (request, response) => {
    // A refused socket already has its 503 and closes soon; resetting it now
    // could make the client lose that answer.
    const socket = request.socket as Socket;
    if (refused.has(socket)) return;
    sockets.set(socket, (sockets.get(socket) ?? 0) + 1);
    response.once("close", () => {
      const busy = (sockets.get(socket) ?? 1) - 1;
      if (sockets.has(socket)) sockets.set(socket, busy);
      // While closing, a connection ends once its last answer is out.
      if (closing && busy === 0) socket.end();
    });
    options.onRequest(request, response);
  });
  server.on("upgrade", (request, socket, head) => {
    if (refused.has(socket as Socket)) return void socket.destroy();
    if (!options.onUpgrade) return refuse(socket, BAD_REQUEST);
    options.onUpgrade(request, socket, head);
  });
  server.on("clientError", (error: NodeJS.ErrnoException, socket: Duplex) => {
    const timedOut = error.code === "ERR_HTTP_REQUEST_TIMEOUT";
    refuse(socket, timedOut ? REQUEST_TIMEOUT : BAD_REQUEST);
  });
  server.on("error", (error) => options.onError("listener failed", error));
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.hostname, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return {
    hostname: options.hostname,
    port,
    connections: () => sockets.size,
    close: (graceMs = 5000) => {
      closing = true;
      return closeServer(server, sockets, graceMs);
    },
  };
}

/**
 * Stops accepting, ends idle connections at once and busy ones as their
 * answers finish, and destroys whatever is left after `graceMs`.
 */
async function closeServer(
  server: http.Server,
  sockets: Map<Socket, number>,
  graceMs: number,
): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  for (const [socket, busy] of sockets) if (busy === 0) socket.end();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const grace = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, graceMs);
  });
  await Promise.race([closed, grace]);
  clearTimeout(timer);
  for (const socket of sockets.keys()) socket.destroy();
  await closed;
}
