/**
 * The hub's listener: every connection must upgrade to a WebSocket on the
 * hub's own TCP listener (`ws_listener.ts`), whose sockets refuse oversized
 * frames unread; each upgraded socket goes to the hub.
 *
 * @module
 */

import type { Logger } from "../log.ts";
import type { ListenerStats } from "../net/tcp_listener.ts";
import { MAX_DAEMONS, MAX_FRAME_BYTES, REFUSAL_REASONS } from "../relay.ts";
import {
  listenForWebSockets,
  type WebSocketListenerLimits,
} from "./ws_listener.ts";

/** A running {@linkcode serveHub} listener. */
export interface HubServer {
  /** `ws://127.0.0.1:<port>`. */
  url: string;
  /** The bound port. */
  port: number;
  /** What the listener has done (for `/metrics`). */
  stats(): ListenerStats;
  /** Stops listening (the hub itself is closed separately). */
  close(): Promise<void>;
}

/** Options of {@linkcode serveHub}. */
export interface ServeHubOptions {
  /** The listen address (default 127.0.0.1). */
  hostname?: string;
  /** The listen port (default: any free port). */
  port?: number;
  /** The hub the sockets are handed to (a `RelayHub`). */
  hub: { handleSocket(ws: WebSocket): void };
  /** Connection limits (defaults: 256 sockets, 10 s for the upgrade request). */
  limits?: Partial<WebSocketListenerLimits>;
  /** Where the connection cap and accept failures are logged. */
  log?: Logger;
}

/** Default connection limits of the hub listener. */
export const HUB_LISTENER_LIMITS: WebSocketListenerLimits = {
  maxConnections: 2 * MAX_DAEMONS,
  headerTimeoutMs: 10_000,
  maxMessageBytes: MAX_FRAME_BYTES,
  idleTimeoutMs: 30_000,
  tooBigReason: REFUSAL_REASONS.frameTooLarge,
};

/**
 * Serves `hub` on `hostname:port` (default 127.0.0.1, random port): every
 * connection must upgrade to a WebSocket; frames over {@linkcode MAX_FRAME_BYTES}
 * are refused from their header.
 *
 * @example A hub that daemons reach over a WebSocket; a socket without a hello is refused
 * ```ts
 * import assert from "node:assert/strict";
 * import { createHub } from "./relay_hub.ts";
 * import { REFUSAL_REASONS } from "../relay.ts";
 * import { serveHub } from "./serve_hub.ts";
 *
 * const stateDir = await Deno.makeTempDir();
 * const hub = createHub({ token: crypto.randomUUID(), stateDir });
 * const server = serveHub({ hub });
 * try {
 *   // `runner daemon --url <server.url> --daemon-id …` connects and says hello.
 *   const socket = new WebSocket(server.url);
 *   const closed = new Promise<{ code: number; reason: string }>((resolve) =>
 *     socket.onclose = ({ code, reason }) => resolve({ code, reason })
 *   );
 *   socket.onopen = () => socket.send(JSON.stringify({ type: "daemon.ping" }));
 *   assert.deepEqual(await closed, {
 *     code: 1008,
 *     reason: REFUSAL_REASONS.helloRequired,
 *   });
 *   assert.deepEqual(hub.listDaemons(), []);
 * } finally {
 *   await server.close();
 *   await hub.close();
 *   await Deno.remove(stateDir, { recursive: true });
 * }
 * ```
 */
export function serveHub(options: ServeHubOptions): HubServer {
  const hostname = options.hostname ?? "127.0.0.1";
  const listener = listenForWebSockets({
    hostname,
    port: options.port ?? 0,
    limits: { ...HUB_LISTENER_LIMITS, ...options.limits },
    // The hub types its sockets as the browser API; ServerWebSocket is that subset.
    onSocket: (socket) =>
      options.hub.handleSocket(socket as unknown as WebSocket),
    log: options.log,
  });
  return {
    url: `ws://${
      hostname.includes(":") ? `[${hostname}]` : hostname
    }:${listener.port}`,
    port: listener.port,
    stats: () => listener.stats(),
    close: () => listener.close(),
  };
}
