/**
 * The hub's TCP listener: accepts at most `maxConnections` sockets (one more
 * gets a clean `503`), gives each `headerTimeoutMs` to send its HTTP upgrade
 * request, answers anything but a WebSocket upgrade with `426`, and hands
 * upgraded connections over as {@linkcode ServerWebSocket}s. An accept error
 * (e.g. too many open files) is reported and the loop goes on.
 *
 * @module
 */

import { createHash } from "node:crypto";
import { delay } from "../timing.ts";
import { ServerWebSocket } from "./websocket.ts";

/** Limits of {@linkcode listenForWebSockets}. */
export interface WebSocketListenerLimits {
  /** Open sockets at most (upgraded or not). */
  maxConnections: number;
  /** Time to send the upgrade request head, in ms. */
  headerTimeoutMs: number;
  /** Largest message accepted, in bytes. */
  maxMessageBytes: number;
  /** Silence before a ping, and then before closing, in ms. */
  idleTimeoutMs: number;
  /** The close reason of a refused oversized message. */
  tooBigReason?: string;
}

/** Options of {@linkcode listenForWebSockets}. */
export interface WebSocketListenerOptions {
  /** The listen address. */
  hostname: string;
  /** The listen port (0: any free port). */
  port: number;
  /** The limits. */
  limits: WebSocketListenerLimits;
  /** Takes each upgraded socket. */
  onSocket(socket: ServerWebSocket): void;
  /** Receives accept failures. */
  onError?(message: string, error: unknown): void;
}

/** A listening {@linkcode listenForWebSockets}. */
export interface WebSocketListener {
  /** The bound port. */
  port: number;
  /** Sockets open now. */
  connections(): number;
  /** Stops accepting and drops connections not yet upgraded. */
  close(): Promise<void>;
}

const MAX_HEAD_BYTES = 16 * 1024;
const WEBSOCKET_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

function rawAnswer(status: string, body: string): Uint8Array {
  return new TextEncoder().encode(
    `HTTP/1.1 ${status}\r\nconnection: close\r\ncontent-type: text/plain\r\n` +
      `content-length: ${new TextEncoder().encode(body).length}\r\n\r\n${body}`,
  );
}

const TOO_MANY = rawAnswer(
  "503 Service Unavailable",
  "coding-relay-v1 hub: too many connections; retry later\n",
);
const UPGRADE_REQUIRED = rawAnswer(
  "426 Upgrade Required",
  "coding-relay-v1 hub: WebSocket upgrade required\n",
);
const TIMED_OUT = rawAnswer(
  "408 Request Timeout",
  "coding-relay-v1 hub: the upgrade request did not arrive in time\n",
);

/** Writes `bytes` and closes, ignoring a peer that is already gone. */
async function answerAndClose(conn: Deno.Conn, bytes: Uint8Array) {
  try {
    await conn.write(bytes);
  } catch { /* gone */ }
  try {
    conn.close();
  } catch { /* closed */ }
}

/** The head of an HTTP request and the bytes read after it. */
interface RequestHead {
  method: string;
  headers: Map<string, string>;
  rest: Uint8Array;
}

/** Reads an HTTP request head (at most 16 KiB); undefined when it is not one. */
async function readHead(conn: Deno.Conn): Promise<RequestHead | undefined> {
  let buffer = new Uint8Array();
  const chunk = new Uint8Array(4096);
  for (;;) {
    const end = findHeadEnd(buffer);
    if (end >= 0) return parseHead(buffer.slice(0, end), buffer.slice(end + 4));
    if (buffer.length > MAX_HEAD_BYTES) return undefined;
    const read = await conn.read(chunk);
    if (read === null) return undefined;
    const next = new Uint8Array(buffer.length + read);
    next.set(buffer);
    next.set(chunk.subarray(0, read), buffer.length);
    buffer = next;
  }
}

function findHeadEnd(buffer: Uint8Array): number {
  for (let i = 3; i < buffer.length; i++) {
    if (
      buffer[i] === 10 && buffer[i - 1] === 13 && buffer[i - 2] === 10 &&
      buffer[i - 3] === 13
    ) return i - 3;
  }
  return -1;
}

function parseHead(bytes: Uint8Array, rest: Uint8Array): RequestHead {
  const lines = new TextDecoder().decode(bytes).split("\r\n");
  const method = lines[0].split(" ")[0] ?? "";
  const headers = new Map<string, string>();
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(":");
    if (colon > 0) {
      headers.set(
        line.slice(0, colon).trim().toLowerCase(),
        line.slice(colon + 1).trim(),
      );
    }
  }
  return { method, headers, rest };
}

function isUpgrade(head: RequestHead): boolean {
  const { headers } = head;
  return head.method === "GET" &&
    headers.get("upgrade")?.toLowerCase() === "websocket" &&
    /\bupgrade\b/i.test(headers.get("connection") ?? "") &&
    headers.get("sec-websocket-version") === "13" &&
    Boolean(headers.get("sec-websocket-key"));
}

function acceptAnswer(key: string): Uint8Array {
  const accept = createHash("sha1").update(key + WEBSOCKET_GUID).digest(
    "base64",
  );
  return new TextEncoder().encode(
    "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\n" +
      `connection: Upgrade\r\nsec-websocket-accept: ${accept}\r\n\r\n`,
  );
}

/** Listens on `hostname:port` (bound before it returns) and upgrades connections. */
export function listenForWebSockets(
  options: WebSocketListenerOptions,
): WebSocketListener {
  const listener = Deno.listen({
    hostname: options.hostname,
    port: options.port,
  });
  const open = new Set<Deno.Conn>();
  const pending = new Set<Deno.Conn>();
  let closed = false;
  const accepting = (async () => {
    while (!closed) {
      let conn: Deno.Conn;
      try {
        conn = await listener.accept();
      } catch (error) {
        if (closed || error instanceof Deno.errors.BadResource) return;
        options.onError?.("hub accept failed", error);
        await delay(100); // e.g. out of file descriptors: let some close first
        continue;
      }
      if (open.size >= options.limits.maxConnections) {
        void answerAndClose(conn, TOO_MANY);
        continue;
      }
      open.add(conn);
      void serveConnection(conn, { options, pending })
        .finally(() => open.delete(conn));
    }
  })();
  return {
    port: (listener.addr as Deno.NetAddr).port,
    connections: () => open.size,
    async close() {
      closed = true;
      listener.close();
      for (const conn of pending) {
        try {
          conn.close();
        } catch { /* closed */ }
      }
      await accepting;
    },
  };
}

/** Reads the upgrade request within the header timeout, then serves the socket until it closes. */
async function serveConnection(
  conn: Deno.Conn,
  { options, pending }: {
    options: WebSocketListenerOptions;
    pending: Set<Deno.Conn>;
  },
): Promise<void> {
  const { limits } = options;
  pending.add(conn);
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timedOut = new Promise<"timeout">((resolve) => {
    timer = setTimeout(() => resolve("timeout"), limits.headerTimeoutMs);
  });
  const head = await Promise.race([
    readHead(conn).catch(() => undefined),
    timedOut,
  ]);
  clearTimeout(timer);
  pending.delete(conn);
  if (head === "timeout") return await answerAndClose(conn, TIMED_OUT);
  if (!head || !isUpgrade(head)) {
    return await answerAndClose(conn, UPGRADE_REQUIRED);
  }
  try {
    await conn.write(acceptAnswer(head.headers.get("sec-websocket-key")!));
  } catch {
    return conn.close();
  }
  const socket = new ServerWebSocket(conn, {
    maxMessageBytes: limits.maxMessageBytes,
    idleTimeoutMs: limits.idleTimeoutMs,
    initial: head.rest,
    tooBigReason: limits.tooBigReason,
  });
  const ended = new Promise<void>((resolve) =>
    socket.addEventListener("close", () => resolve(), { once: true })
  );
  options.onSocket(socket);
  await ended;
}
