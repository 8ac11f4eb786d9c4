/**
 * The daemon side of `coding-relay-v1`: connects out to a hub, says hello,
 * runs the jobs it is given through a caller-supplied `runJob`, forwards their
 * events and MCP traffic, acknowledges cancels only after cleanup, and on
 * disconnect cancels and awaits every job before reconnecting. See `docs/relay.md`.
 *
 * @module
 */

import { RunnerError } from "./errors.ts";
import {
  CLOSE_CLEANUP_UNCONFIRMED,
  CLOSE_PROTOCOL_ERROR,
  type DaemonFrame,
  encodeDaemonFrame,
  encodeEventFrames,
  isOversizedFrame,
  type Json,
  type JsonObject,
  MAX_FRAME_BYTES,
  MCP_REQUEST_TIMEOUT_MS,
  parseFrame,
  randomUrlSafe,
  RECONNECT_DELAY_MS,
  REFUSAL_REASONS,
  RELAY_PROTOCOL,
} from "./relay.ts";

/** One job handed to the caller's `runJob`. */
export interface DaemonJob {
  /** The hub's job id. */
  jobId: string;
  /** The `run.start` payload. */
  payload: JsonObject;
  /** Sends one run event to the hub (large deltas are split; dropped once the job ended). */
  emit(event: JsonObject): void;
  /** Aborted on `run.cancel` or disconnect. */
  signal: AbortSignal;
  /** Sends an MCP message to the hub; resolves with its answer (`null` for notifications). */
  mcp(payload: Json): Promise<Json>;
}

/** What `runJob` reports once the job and its processes are gone. */
export interface DaemonJobResult {
  /** False when the agent's process group may still be alive. */
  cleanupConfirmed: boolean;
}

/** One log record of the daemon client (never contains the token). */
export interface DaemonLogEntry {
  /** Severity. */
  level: "info" | "warn" | "error";
  /** What happened. */
  message: string;
  /** The job concerned, if any. */
  jobId?: string;
}

/** Options of {@linkcode runDaemonClient}. */
export interface DaemonClientOptions {
  /** The hub's WebSocket URL. */
  url: string;
  /** This daemon's stable ID. */
  daemonId: string;
  /** The hub's shared token. */
  token: string;
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
  /** Stops the client: open jobs are cancelled and awaited first. */
  signal: AbortSignal;
  /** Receives log records. */
  onLog?: (entry: DaemonLogEntry) => void;
}

interface Session {
  ws: WebSocket;
  ready: boolean;
  jobs: Map<string, { controller: AbortController; done: Promise<void> }>;
  pendingMcp: Map<string, (result: Json | RunnerError) => void>;
  cleanupFailed: boolean;
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
    const delay = Math.min(
      base * 2 ** Math.min(failures, 6),
      Math.max(base, 60_000),
    );
    await sleep(delay + Math.random() * delay * 0.2, options.signal);
  }
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

async function connectOnce(
  options: DaemonClientOptions,
  log: (entry: DaemonLogEntry) => void,
): Promise<Session> {
  const ws = new WebSocket(options.url);
  const session: Session = {
    ws,
    ready: false,
    jobs: new Map(),
    pendingMcp: new Map(),
    cleanupFailed: false,
  };
  const closed = new Promise<CloseEvent>((resolve) =>
    ws.addEventListener("close", resolve)
  );
  const stop = () => ws.close(1000);
  options.signal.addEventListener("abort", stop, { once: true });
  ws.addEventListener("open", () => {
    send(session, {
      type: "daemon.hello",
      daemon_id: options.daemonId,
      protocol: RELAY_PROTOCOL,
      token: options.token,
      metadata: {
        pid: Deno.pid,
        cwd: Deno.cwd(),
        platform: platformName(),
        ...(options.version === undefined ? {} : { version: options.version }),
        ...options.metadata,
      },
    });
  });
  ws.addEventListener("message", (event) => {
    const text = typeof event.data === "string"
      ? event.data
      : new TextDecoder().decode(event.data);
    onMessage(options, session, text, log);
  });
  const event = await closed;
  options.signal.removeEventListener("abort", stop);
  log({
    level: session.ready ? "info" : "warn",
    message: `disconnected from the hub (close ${event.code}${
      event.reason ? `: ${event.reason}` : ""
    })`,
  });
  for (const settle of session.pendingMcp.values()) {
    settle(
      new RunnerError(
        "relay.mcp_failed",
        "the hub connection closed before the MCP answer came",
      ),
    );
  }
  session.pendingMcp.clear();
  // A replacement socket must never inherit still-running jobs.
  for (const job of session.jobs.values()) job.controller.abort();
  await Promise.all([...session.jobs.values()].map((job) => job.done));
  return session;
}

function send(session: Session, frame: DaemonFrame | string): boolean {
  if (session.ws.readyState !== WebSocket.OPEN) return false;
  session.ws.send(typeof frame === "string" ? frame : encodeDaemonFrame(frame));
  return true;
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
    startJob(options, session, frame.job_id, frame.payload, log);
  } else if (frame.type === "run.cancel") {
    session.jobs.get(frame.job_id)?.controller.abort();
  } else if (frame.type === "mcp.response") {
    const settle = session.pendingMcp.get(frame.request_id);
    session.pendingMcp.delete(frame.request_id);
    settle?.(frame.payload);
  }
}

function startJob(
  options: DaemonClientOptions,
  session: Session,
  jobId: string,
  payload: JsonObject,
  log: (entry: DaemonLogEntry) => void,
): void {
  const controller = new AbortController();
  let open = true;
  const emit = (event: JsonObject) => {
    if (!open) return;
    for (const text of encodeEventFrames(jobId, event, MAX_FRAME_BYTES)) {
      if (isOversizedFrame(text)) {
        log({
          level: "error",
          message: `dropped a ${String(event.type)} event over 1 MiB`,
          jobId,
        });
        continue;
      }
      send(session, text);
    }
  };
  const mcp = (message: Json) => requestMcp(options, session, jobId, message);
  const done = (async () => {
    let confirmed = true;
    let failure: unknown;
    try {
      ({ cleanupConfirmed: confirmed } = await options.runJob({
        jobId,
        payload,
        emit,
        signal: controller.signal,
        mcp,
      }));
    } catch (error) {
      failure = error;
    }
    open = false;
    if (!confirmed) {
      session.cleanupFailed = true;
      log({
        level: "error",
        message: "job cleanup unconfirmed; daemon halted",
        jobId,
      });
      session.ws.close(
        CLOSE_CLEANUP_UNCONFIRMED,
        REFUSAL_REASONS.cleanupUnconfirmed,
      );
      return;
    }
    if (controller.signal.aborted) {
      send(session, {
        type: "run.event",
        job_id: jobId,
        event: {
          type: "run.failed",
          data: {
            error: "daemon run cancelled",
            code: "agent_runtime.daemon_cancelled",
          },
        },
      });
    } else if (failure !== undefined) {
      const error = failure instanceof Error
        ? failure.message
        : String(failure);
      log({ level: "error", message: `job failed: ${error}`, jobId });
      send(session, {
        type: "run.event",
        job_id: jobId,
        event: {
          type: "run.failed",
          data: { error, code: "agent_runtime.daemon_unexpected" },
        },
      });
    }
    send(session, { type: "run.finished", job_id: jobId });
  })().finally(() => session.jobs.delete(jobId));
  session.jobs.set(jobId, { controller, done });
}

function requestMcp(
  options: DaemonClientOptions,
  session: Session,
  jobId: string,
  payload: Json,
): Promise<Json> {
  const requestId = randomUrlSafe(12);
  const text = encodeDaemonFrame({
    type: "mcp.request",
    request_id: requestId,
    job_id: jobId,
    payload,
  });
  if (isOversizedFrame(text)) {
    return Promise.reject(
      new RunnerError(
        "relay.protocol_error",
        "the MCP message is larger than the relay's 1 MiB frame limit",
      ),
    );
  }
  return new Promise((resolve, reject) => {
    const timeoutMs = options.mcpTimeoutMs ?? MCP_REQUEST_TIMEOUT_MS;
    const timer = setTimeout(() => {
      session.pendingMcp.delete(requestId);
      reject(
        new RunnerError(
          "relay.mcp_failed",
          `the hub did not answer the MCP request within ${timeoutMs} ms`,
        ),
      );
    }, timeoutMs);
    session.pendingMcp.set(requestId, (result) => {
      clearTimeout(timer);
      if (result instanceof RunnerError) reject(result);
      else resolve(result);
    });
    if (!send(session, text)) {
      session.pendingMcp.get(requestId)?.(
        new RunnerError(
          "relay.mcp_failed",
          "not connected to the hub; the MCP request was not sent",
        ),
      );
      session.pendingMcp.delete(requestId);
    }
  });
}
