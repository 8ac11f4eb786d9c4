/**
 * The `coding-relay-v1` hub: accepts daemon WebSockets (handshake with the
 * Python hub's exact refusals), runs jobs on them, answers `mcp.request`,
 * fences daemon IDs whose cleanup is unconfirmed and persists those fences as
 * `.pending` markers. Attach {@linkcode RelayHub.handleSocket} to any upgrade,
 * or use {@linkcode serveHub}. See `docs/relay.md`.
 *
 * @module
 */

import { createHash, timingSafeEqual } from "node:crypto";
import { RunnerError } from "../errors.ts";
import { FenceStore } from "./fences.ts";
import { answerMcp, type McpHandler } from "./mcp.ts";
import { sharedCapabilities } from "./capabilities.ts";
import {
  deliverEvent,
  deliverUpdate,
  failDisconnectedJobs,
  fencedError,
  type HubConnection,
  type HubCore,
  type HubLogEntry,
  type RelayJobResult,
  type RunJobOptions,
  runRelayJob,
} from "./jobs.ts";
import {
  CANCEL_TIMEOUT_MS,
  checkHello,
  CLOSE_POLICY,
  CLOSE_TOO_BIG,
  encodeHubFrame,
  HELLO_TIMEOUT_MS,
  type HubFrame,
  isOversizedFrame,
  type JsonObject,
  MAX_DAEMONS,
  MAX_JOBS,
  parseFrame,
  REFUSAL_REASONS,
  RELAY_PROTOCOL,
} from "../relay.ts";

export type {
  HubLogEntry,
  RelayJobOutcome,
  RelayJobResult,
  RunJobOptions,
} from "./jobs.ts";
export type { McpHandler, McpJobContext } from "./mcp.ts";
export {
  HUB_LISTENER_LIMITS,
  type HubServer,
  serveHub,
  type ServeHubOptions,
} from "./serve_hub.ts";

/** Options of {@linkcode createHub}. */
export interface HubOptions {
  /**
   * Shared secret daemons must present. A hub needs it or `tokens`, unless
   * `withoutToken` says it takes any daemon without a credential.
   */
  token?: string;
  /**
   * Per-daemon tokens by daemon ID: a listed ID must present its own token
   * (the shared one does not admit it); with these set and no shared token,
   * only listed IDs may connect.
   */
  tokens?: Record<string, string>;
  /**
   * With neither `token` nor `tokens`: accept every hello without a check
   * (any process that reaches the hub may take any free daemon ID). Only an
   * operator's explicit choice, `--daemon-loopback-without-token`.
   */
  withoutToken?: boolean;
  /** Jobs one daemon ID may run at once (default: the hub's whole capacity). */
  maxJobsPerDaemon?: number;
  /** Daemons kept at once, connected plus fenced (default {@linkcode MAX_DAEMONS}). */
  maxDaemons?: number;
  /** Where `.pending` markers live; fences are reloaded from it. */
  stateDir: string;
  /** How long to wait for `run.finished` after `run.cancel` (default 10 s). */
  cancelTimeoutMs?: number;
  /** How long to wait for `daemon.hello` (default 10 s). */
  helloTimeoutMs?: number;
  /** Receives log records (never the token). */
  onLog?: (entry: HubLogEntry) => void;
  /** Answers `mcp.request`; default: a JSON-RPC error "no assets for this run". */
  mcpHandler?: McpHandler;
  /** Called after a daemon connects or disconnects (e.g. to publish presence). */
  onChange?: () => void;
}

/** One daemon as {@linkcode RelayHub.listDaemons} reports it. */
export interface DaemonInfo {
  /** The daemon ID. */
  daemonId: string;
  /** Whether a socket with this ID is connected. */
  connected: boolean;
  /** Whether the ID is fenced. */
  fenced: boolean;
  /** The hello metadata (last known, `{}` if never seen by this hub). */
  metadata: JsonObject;
  /** When the socket connected (ms since the epoch), if connected. */
  connectedAt?: number;
  /** When the socket last sent a frame (ms since the epoch), if connected. */
  lastSeenAt?: number;
  /** Ids of its jobs in flight, sorted. */
  activeJobs: string[];
}

function tokenDigest(value: string): Uint8Array {
  return createHash("sha256").update(value, "utf8").digest();
}

/** A coding-relay-v1 hub. Make one with {@linkcode createHub}. */
export class RelayHub {
  readonly #token: Uint8Array | undefined;
  readonly #tokens: Map<string, Uint8Array>;
  readonly #helloTimeoutMs: number;
  readonly #mcpHandler?: McpHandler;
  readonly #onLog?: (entry: HubLogEntry) => void;
  readonly #onChange?: () => void;
  readonly #sockets = new Set<WebSocket>();
  readonly #lastMetadata = new Map<string, JsonObject>();
  readonly #running = new Set<Promise<void>>();
  #changed = Promise.withResolvers<void>();
  readonly #core: HubCore;
  readonly #maxDaemons: number;

  /** Makes a hub; prefer {@linkcode createHub}. */
  constructor(options: HubOptions) {
    if (
      !options.token && !Object.keys(options.tokens ?? {}).length &&
      !options.withoutToken
    ) {
      throw new RunnerError(
        "config.invalid",
        "A daemon hub needs a daemon token (or per-daemon tokens): without one any process that reaches it can connect as a daemon and take its jobs.",
      );
    }
    this.#token = options.token ? tokenDigest(options.token) : undefined;
    this.#tokens = new Map(
      Object.entries(options.tokens ?? {}).map((
        [id, token],
      ) => [id, tokenDigest(token)]),
    );
    this.#helloTimeoutMs = options.helloTimeoutMs ?? HELLO_TIMEOUT_MS;
    this.#maxDaemons = options.maxDaemons ?? MAX_DAEMONS;
    this.#mcpHandler = options.mcpHandler;
    this.#onLog = options.onLog;
    this.#onChange = options.onChange;
    this.#core = {
      connections: new Map(),
      jobs: new Map(),
      fences: new FenceStore(options.stateDir),
      cancelTimeoutMs: options.cancelTimeoutMs ?? CANCEL_TIMEOUT_MS,
      maxJobsPerDaemon: options.maxJobsPerDaemon ?? MAX_JOBS,
      closed: false,
      send: (connection, frame) => this.#send(connection.ws, frame),
      log: (entry) => this.#log(entry),
      nextChange: () => this.#changed.promise,
    };
  }

  /** Runs a job on `daemonId` (see {@linkcode runRelayJob}). */
  runJob(options: RunJobOptions): Promise<RelayJobResult> {
    const running = runRelayJob(this.#core, options);
    const tracked = running.then(() => {}, () => {});
    this.#running.add(tracked);
    void tracked.then(() => this.#running.delete(tracked));
    return running;
  }

  /** Throws `agent_runtime.daemon_fenced` if `daemonId` is fenced. */
  checkFence(daemonId: string): void {
    if (this.#core.fences.has(daemonId)) throw fencedError(daemonId);
  }

  /** Connected and fenced daemons, sorted by ID. */
  listDaemons(): DaemonInfo[] {
    const ids = new Set([
      ...this.#core.connections.keys(),
      ...this.#core.fences.list(),
    ]);
    return [...ids].sort().map((daemonId) => {
      const connection = this.#core.connections.get(daemonId);
      return {
        daemonId,
        connected: connection !== undefined,
        fenced: this.#core.fences.has(daemonId),
        metadata: connection?.metadata ?? this.#lastMetadata.get(daemonId) ??
          {},
        connectedAt: connection?.connectedAt,
        lastSeenAt: connection?.lastSeenAt,
        activeJobs: connection ? [...connection.activeJobs].sort() : [],
      };
    });
  }

  /** Fences `daemonId` (set elsewhere, e.g. by another replica of a fleet); writes no marker. */
  fence(daemonId: string): void {
    this.#core.fences.add(daemonId);
  }

  /** Lifts a fence after an operator verified quiescence; returns whether it was fenced. */
  async unfence(daemonId: string): Promise<boolean> {
    const wasFenced = await this.#core.fences.unfence(daemonId);
    if (wasFenced) {
      this.#log({ level: "info", message: "daemon ID unfenced", daemonId });
    }
    return wasFenced;
  }

  /** Cancels every job (waiting for acknowledgements), then closes every socket. */
  async close(): Promise<void> {
    if (this.#core.closed) return;
    this.#core.closed = true;
    this.#notify();
    for (const session of this.#core.jobs.values()) session.stop.abort();
    await Promise.all(this.#running);
    for (const ws of this.#sockets) {
      this.#close(ws, 1001, REFUSAL_REASONS.hubShuttingDown);
    }
  }

  /** Serves one daemon WebSocket (e.g. from `Deno.upgradeWebSocket`). */
  handleSocket(ws: WebSocket): void {
    ws.binaryType = "arraybuffer";
    this.#sockets.add(ws);
    let connection: HubConnection | undefined;
    let helloTimer: ReturnType<typeof setTimeout> | undefined = setTimeout(
      () => {
        helloTimer = undefined;
        this.#close(ws, CLOSE_POLICY, REFUSAL_REASONS.helloRequired);
      },
      this.#helloTimeoutMs,
    );
    ws.addEventListener("message", (event) => {
      const text = typeof event.data === "string"
        ? event.data
        : new TextDecoder().decode(event.data as ArrayBuffer);
      if (isOversizedFrame(text)) {
        this.#close(ws, CLOSE_TOO_BIG, REFUSAL_REASONS.frameTooLarge);
        return;
      }
      if (connection) {
        this.#onMessage(connection, text);
        return;
      }
      if (helloTimer === undefined) return; // already refused
      clearTimeout(helloTimer);
      helloTimer = undefined;
      connection = this.#accept(ws, text);
    });
    ws.addEventListener("close", () => {
      clearTimeout(helloTimer);
      this.#sockets.delete(ws);
      if (!connection) return;
      const { daemonId } = connection;
      if (this.#core.connections.get(daemonId) === connection) {
        this.#core.connections.delete(daemonId);
      }
      failDisconnectedJobs(this.#core, connection);
      if (this.#core.fences.has(daemonId)) {
        this.#log({
          level: "warn",
          message: "daemon disconnected with unfinished jobs; daemon ID fenced",
          daemonId,
        });
      } else {
        this.#log({ level: "info", message: "daemon disconnected", daemonId });
      }
      this.#notify();
    });
    if (this.#core.closed) {
      this.#close(ws, 1001, REFUSAL_REASONS.hubShuttingDown);
    }
  }

  #accept(ws: WebSocket, text: string): HubConnection | undefined {
    const shared = this.#token;
    const hello = checkHello(text, {
      hasToken: shared !== undefined || this.#tokens.size > 0,
      tokenMatches: (given, daemonId) => {
        const expected = this.#tokens.get(daemonId) ?? shared;
        return expected !== undefined &&
          timingSafeEqual(tokenDigest(given), expected);
      },
    });
    if (!hello.ok) {
      this.#log({ level: "warn", message: `daemon refused: ${hello.reason}` });
      this.#close(ws, CLOSE_POLICY, hello.reason);
      return undefined;
    }
    const { daemonId } = hello;
    const { connections, fences } = this.#core;
    if (
      connections.has(daemonId) || fences.has(daemonId) ||
      fences.markerExists(daemonId) ||
      connections.size + fences.size >= this.#maxDaemons
    ) {
      this.#log({
        level: "warn",
        message: `daemon refused: ${REFUSAL_REASONS.connectedOrFenced}`,
        daemonId,
      });
      this.#close(ws, CLOSE_POLICY, REFUSAL_REASONS.connectedOrFenced);
      return undefined;
    }
    const now = Date.now();
    const connection: HubConnection = {
      daemonId,
      ws,
      metadata: hello.metadata,
      connectedAt: now,
      lastSeenAt: now,
      activeJobs: new Set(),
    };
    connections.set(daemonId, connection);
    this.#lastMetadata.set(daemonId, hello.metadata);
    const capabilities = sharedCapabilities(hello.metadata);
    this.#send(ws, {
      type: "daemon.ready",
      daemon_id: daemonId,
      protocol: RELAY_PROTOCOL,
      // Only for daemons that announced capabilities: Python peers get the
      // recorded frame byte for byte.
      ...(capabilities ? { capabilities } : {}),
    });
    this.#log({ level: "info", message: "daemon connected", daemonId });
    this.#notify();
    return connection;
  }

  #onMessage(connection: HubConnection, text: string): void {
    if (this.#core.connections.get(connection.daemonId) !== connection) return;
    connection.lastSeenAt = Date.now();
    const frame = parseFrame(text);
    if (frame instanceof Error) {
      this.#log({
        level: "warn",
        message: `ignored frame: ${frame.message}`,
        daemonId: connection.daemonId,
      });
      return;
    }
    if (frame.type === "daemon.ping") {
      this.#send(connection.ws, { type: "daemon.pong" });
      return;
    }
    if (!("job_id" in frame)) return;
    const session = this.#core.jobs.get(frame.job_id);
    if (!session || session.owner !== connection) return;
    if (frame.type === "run.finished") {
      session.done = true;
      session.ended.resolve("finished");
    } else if (frame.type === "run.event") {
      if (!session.cancelling && !session.done) {
        deliverEvent(this.#core, session, frame.event, frame.runner);
      }
    } else if (frame.type === "run.update") {
      if (!session.cancelling && !session.done) {
        deliverUpdate(this.#core, session, frame.update);
      }
    } else if (frame.type === "mcp.request") {
      void answerMcp(this.#core, session, frame, this.#mcpHandler);
    }
  }

  #send(ws: WebSocket, frame: HubFrame): boolean {
    if (ws.readyState !== WebSocket.OPEN) return false;
    try {
      ws.send(encodeHubFrame(frame));
      return true;
    } catch {
      return false;
    }
  }

  #close(ws: WebSocket, code: number, reason: string): void {
    try {
      ws.close(code, reason);
    } catch {
      // already closing
    }
  }

  #notify(): void {
    const previous = this.#changed;
    this.#changed = Promise.withResolvers<void>();
    previous.resolve();
    this.#onChange?.();
  }

  #log(entry: HubLogEntry): void {
    this.#onLog?.(entry);
  }
}

/** Makes a hub (markers in `stateDir` are loaded as fences right away). */
export function createHub(options: HubOptions): RelayHub {
  return new RelayHub(options);
}
