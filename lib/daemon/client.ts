/**
 * The daemon side of `coding-relay-v1`: connects out to a hub, says hello,
 * runs the jobs it is given through a caller-supplied `runJob`, forwards their
 * events and MCP traffic, acknowledges cancels only after cleanup, pings the
 * hub to notice a silently dead connection, and on disconnect cancels and
 * awaits every job before reconnecting. See `docs/relay.md`.
 *
 * @module
 */

import { type KeepAlive, startKeepAlive } from "./keepalive.ts";
import { createMcpRequests } from "./mcp_requests.ts";
import {
  type DaemonJob,
  type DaemonJobResult,
  type DaemonLogEntry,
  send,
  type Session,
  startJob,
} from "./session.ts";
import { RunnerError } from "../errors.ts";
import {
  CLOSE_KEEPALIVE_TIMEOUT,
  CLOSE_PROTOCOL_ERROR,
  type DaemonFrame,
  type JsonObject,
  MCP_REQUEST_TIMEOUT_MS,
  parseFrame,
  PERMISSION_ASK_CAPABILITY,
  PING_INTERVAL_MS,
  PING_TIMEOUT_MS,
  RECONNECT_DELAY_MS,
  REFUSAL_REASONS,
  RELAY_PROTOCOL,
  SESSION_UPDATE_CAPABILITY,
} from "../relay.ts";

/** The optional coding-relay-v1 capabilities this daemon announces. */
export const DAEMON_CAPABILITIES: readonly string[] = [
  PERMISSION_ASK_CAPABILITY,
  SESSION_UPDATE_CAPABILITY,
];

export type { DaemonJob, DaemonJobResult, DaemonLogEntry } from "./session.ts";

/** Options of {@linkcode runDaemonClient}. */
export interface DaemonClientOptions {
  /** The hub's WebSocket URL. */
  url: string;
  /** This daemon's stable ID. */
  daemonId: string;
  /**
   * The hub's token, or how to read it before each connection (the token a
   * `runner serve` on this machine keeps, which it makes on its first start).
   */
  token: string | (() => Promise<string>);
  /** Extra hello metadata (after `pid`, `cwd`, `platform`, `version`). */
  metadata?: JsonObject;
  /** Our version, sent in the hello metadata when given. */
  version?: string;
  /** Runs one job until it ended and its processes are gone. */
  runJob: (job: DaemonJob) => Promise<DaemonJobResult>;
  /** Base reconnect delay (default 5 s), doubled per failed attempt up to 60 s, plus jitter. */
  reconnectDelayMs?: number;
  /** MCP request timeout (default 60 s). */
  mcpTimeoutMs?: number;
  /** How often to send `daemon.ping` while connected (default 20 s). */
  pingIntervalMs?: number;
  /**
   * How long to wait for any hub frame after a ping, or after the hello,
   * before the connection counts as dead and is closed (default 60 s). The
   * clock stands still while an MCP request to the hub is outstanding.
   */
  pingTimeoutMs?: number;
  /** Stops the client: open jobs are cancelled and awaited first. */
  signal: AbortSignal;
  /** Receives log records. */
  onLog?: (entry: DaemonLogEntry) => void;
}

/**
 * Connects and serves jobs until `signal` aborts. Rejects with
 * `agent_runtime.daemon_cleanup_failed` when a job's cleanup was not
 * confirmed (it never reconnects then).
 */
export async function runDaemonClient(
  options: DaemonClientOptions,
): Promise<void> {
  const log = (entry: DaemonLogEntry) => options.onLog?.(entry);
  const base = options.reconnectDelayMs ?? RECONNECT_DELAY_MS;
  let failures = 0;
  while (!options.signal.aborted) {
    const session = await connectOnce(options, log);
    if (session.cleanupFailed) {
      throw new RunnerError(
        "agent_runtime.daemon_cleanup_failed",
        "daemon cleanup failed; refusing to reconnect until an operator has verified that no agent process of a job is left on this machine, then restart the daemon",
      );
    }
    if (options.signal.aborted) break;
    failures = session.ready ? 0 : failures + 1;
    await sleep(reconnectDelay(base, failures), options.signal);
  }
}

/** The longest reconnect delay before jitter (unless the base is longer). */
export const MAX_RECONNECT_DELAY_MS = 60_000;

/**
 * The wait before the next connection attempt, after `failures` failed
 * attempts in a row (0 after a connection that reached `daemon.ready`): the
 * base doubled per failure, at most {@linkcode MAX_RECONNECT_DELAY_MS} (or
 * the base if that is longer), plus up to 20% jitter from `random` (0 to 1).
 */
export function reconnectDelay(
  base: number,
  failures: number,
  random: () => number = Math.random,
): number {
  const delay = Math.min(
    base * 2 ** Math.min(failures, 6),
    Math.max(base, MAX_RECONNECT_DELAY_MS),
  );
  return delay + random() * delay * 0.2;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}

function platformName(): string {
  return Deno.build.os === "windows" ? "nt" : "posix";
}

/** One connection: hello, jobs, and on its end every job cancelled and awaited. */
async function connectOnce(
  options: DaemonClientOptions,
  log: (entry: DaemonLogEntry) => void,
): Promise<Session> {
  const token = typeof options.token === "string"
    ? options.token
    : await options.token();
  const ws = new WebSocket(options.url);
  const session: Session = {
    ws,
    ready: false,
    jobs: new Map(),
    hubCapabilities: [],
    mcp: createMcpRequests({
      send: (text) => send(session, text),
      timeoutMs: options.mcpTimeoutMs ?? MCP_REQUEST_TIMEOUT_MS,
      // A hub answering a tool call answers no ping meanwhile (Python).
      hold: () => keepAlive.hold(),
    }),
    cleanupFailed: false,
  };
  const closed = new Promise<CloseEvent>((resolve) =>
    ws.addEventListener("close", resolve)
  );
  const timeoutMs = options.pingTimeoutMs ?? PING_TIMEOUT_MS;
  const dead = Promise.withResolvers<void>();
  const keepAlive = startSessionKeepAlive(session, {
    intervalMs: options.pingIntervalMs ?? PING_INTERVAL_MS,
    timeoutMs,
    log,
    onDead: dead.resolve,
  });
  const stop = () => {
    ws.close(1000);
    keepAlive.expectAnswer(); // the hub's close frame
  };
  options.signal.addEventListener("abort", stop, { once: true });
  ws.addEventListener("open", () => {
    send(session, helloFrame(options, token));
    keepAlive.expectAnswer();
  });
  ws.addEventListener("message", (event) => {
    // Once we close (stop, dead hub), late frames must not start jobs.
    if (ws.readyState !== WebSocket.OPEN) return;
    keepAlive.seen();
    const text = typeof event.data === "string"
      ? event.data
      : new TextDecoder().decode(event.data);
    onMessage(options, session, text, log);
    if (session.ready) keepAlive.startPinging();
  });
  const ended = await Promise.race([
    closed.then((event) =>
      `close ${event.code}${event.reason ? `: ${event.reason}` : ""}`
    ),
    dead.promise.then(() => REFUSAL_REASONS.keepaliveTimeout),
  ]);
  keepAlive.stop();
  options.signal.removeEventListener("abort", stop);
  log({
    level: session.ready ? "info" : "warn",
    message: `disconnected from the hub (${ended})`,
  });
  session.mcp.failAll();
  // A replacement socket must never inherit still-running jobs.
  for (const job of session.jobs.values()) job.controller.abort();
  await Promise.all([...session.jobs.values()].map((job) => job.done));
  // A dead peer may never confirm the close: wait for it only so long.
  await raceTimeout(closed, timeoutMs);
  return session;
}

/** The `daemon.hello` frame: our ID, protocol, token and metadata. */
function helloFrame(options: DaemonClientOptions, token: string): DaemonFrame {
  return {
    type: "daemon.hello",
    daemon_id: options.daemonId,
    protocol: RELAY_PROTOCOL,
    token,
    metadata: {
      pid: Deno.pid,
      cwd: Deno.cwd(),
      platform: platformName(),
      ...(options.version === undefined ? {} : { version: options.version }),
      capabilities: [...DAEMON_CAPABILITIES],
      ...options.metadata,
    },
  };
}

/** The session's keep-alive; a dead connection is closed, then `onDead` runs. */
function startSessionKeepAlive(
  session: Session,
  options: {
    intervalMs: number;
    timeoutMs: number;
    log: (entry: DaemonLogEntry) => void;
    onDead: () => void;
  },
): KeepAlive {
  const { timeoutMs } = options;
  return startKeepAlive({
    sendPing: () => send(session, { type: "daemon.ping" }),
    onDead() {
      options.log({
        level: "warn",
        message:
          `no frame from the hub within ${timeoutMs} ms; closing the connection as dead`,
      });
      try {
        session.ws.close(
          CLOSE_KEEPALIVE_TIMEOUT,
          REFUSAL_REASONS.keepaliveTimeout,
        );
      } catch {
        // already closing
      }
      options.onDead();
    },
    intervalMs: options.intervalMs,
    timeoutMs,
  });
}

async function raceTimeout(promise: Promise<unknown>, ms: number) {
  let timer: ReturnType<typeof setTimeout> | undefined;
  await Promise.race([
    promise,
    new Promise((resolve) => timer = setTimeout(resolve, ms)),
  ]);
  clearTimeout(timer);
}

function onMessage(
  options: DaemonClientOptions,
  session: Session,
  text: string,
  log: (entry: DaemonLogEntry) => void,
): void {
  const frame = parseFrame(text);
  if (!session.ready) {
    if (
      frame instanceof Error || frame.type !== "daemon.ready" ||
      frame.protocol !== RELAY_PROTOCOL
    ) {
      log({
        level: "error",
        message:
          "unexpected answer to daemon.hello; is this a coding-relay-v1 hub?",
      });
      session.ws.close(CLOSE_PROTOCOL_ERROR, "daemon.ready required");
      return;
    }
    session.ready = true;
    session.hubCapabilities = Array.isArray(frame.capabilities)
      ? frame.capabilities.filter((c) => DAEMON_CAPABILITIES.includes(c))
      : [];
    log({
      level: "info",
      message: `connected to the hub as ${options.daemonId}`,
    });
    return;
  }
  if (frame instanceof Error) {
    if (frame.detail?.reason === "obsolete") {
      log({ level: "error", message: frame.message });
      session.ws.close(CLOSE_PROTOCOL_ERROR, REFUSAL_REASONS.obsolete);
    } else {
      log({ level: "warn", message: `ignored frame: ${frame.message}` });
    }
    return;
  }
  if (frame.type === "run.start") {
    if (session.jobs.has(frame.job_id)) {
      log({
        level: "error",
        message: "duplicate run.start",
        jobId: frame.job_id,
      });
      session.ws.close(CLOSE_PROTOCOL_ERROR, "duplicate run.start");
      return;
    }
    startJob(session, {
      jobId: frame.job_id,
      payload: frame.payload,
      runJob: options.runJob,
      log,
    });
  } else if (frame.type === "run.cancel") {
    session.jobs.get(frame.job_id)?.controller.abort();
  } else if (frame.type === "run.permission") {
    session.jobs.get(frame.job_id)?.answerPermission?.(
      frame.request_id,
      frame.answer,
    );
  } else if (frame.type === "mcp.response") {
    session.mcp.answer(frame.request_id, frame.payload);
  }
}
