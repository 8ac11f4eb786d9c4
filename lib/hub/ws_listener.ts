/**
 * The hub's listener: the shared accept loop (`net/tcp_listener.ts`: at most
 * `maxConnections` sockets; at the cap the oldest one still sending its
 * upgrade request is closed with a `503` to make room, and a new one is
 * refused with `503` only when every socket is upgraded; accept errors such
 * as running out of file descriptors never stop it), `headerTimeoutMs` to
 * send the HTTP upgrade request, `426` for anything but a WebSocket upgrade,
 * and upgraded connections handed over as {@linkcode ServerWebSocket}s.
 *
 * @module
 */

import { createHash } from "node:crypto";
import type { Logger } from "../log.ts";
import {
  type ListenerStats,
  listenTcp,
  type Slot,
} from "../net/tcp_listener.ts";
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
  /** Where the connection cap and accept failures are logged. */
  log?: Logger;
}

/** A listening {@linkcode listenForWebSockets}. */
export interface WebSocketListener {
  /** The bound port. */
  port: number;
  /** Sockets open now. */
  connections(): number;
  /** What the listener has done (for `/metrics`). */
  stats(): ListenerStats;
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
    // RFC 9112: no whitespace between a field's name and its colon; such a
    // line names no field we read.
    if (colon > 0) {
      headers.set(
        line.slice(0, colon).toLowerCase(),
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
  const pending = new Set<Deno.Conn>();
  const listener = listenTcp({
    hostname: options.hostname,
    port: options.port,
    maxConnections: options.limits.maxConnections,
    name: "hub",
    refusal: TOO_MANY,
    log: options.log,
    onConnection(slot) {
      const state = { evicted: false };
      void serveConnection(slot, { options, pending, state })
        .finally(() => slot.release());
      return () => {
        state.evicted = true;
        pending.delete(slot.conn);
        return answerAndClose(slot.conn, TOO_MANY);
      };
    },
  });
  return {
    port: listener.port,
    connections: () => listener.stats().open,
    stats: () => listener.stats(),
    async close() {
      await listener.close();
      for (const conn of pending) {
        try {
          conn.close();
        } catch { /* closed */ }
      }
    },
  };
}

/** Reads the upgrade request within the header timeout, then serves the socket until it closes. */
async function serveConnection(
  slot: Slot,
  { options, pending, state }: {
    options: WebSocketListenerOptions;
    pending: Set<Deno.Conn>;
    state: { evicted: boolean };
  },
): Promise<void> {
  const { limits } = options;
  const { conn } = slot;
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
  // Closed to make room for a newer connection: it has its answer already.
  if (state.evicted) return;
  if (head === "timeout") return await answerAndClose(conn, TIMED_OUT);
  if (!head || !isUpgrade(head)) {
    return await answerAndClose(conn, UPGRADE_REQUIRED);
  }
  slot.busy();
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
