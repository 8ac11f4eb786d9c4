/**
 * One connection of the daemon client to the hub: its state, sending frames,
 * and the jobs it runs. A job's events go out while it runs; once it ended,
 * the hub learns how (cancelled, failed, or cleanup unconfirmed) and gets
 * `run.finished`. See `docs/relay.md`.
 *
 * @module
 */

import type { McpRequests } from "./mcp_requests.ts";
import {
  CLOSE_CLEANUP_UNCONFIRMED,
  type DaemonFrame,
  encodeDaemonFrame,
  isOversizedFrame,
  type Json,
  type JsonObject,
  MAX_FRAME_BYTES,
  REFUSAL_REASONS,
} from "../relay.ts";
import { encodeEventFrames } from "../relay/event_fit.ts";

/** One job handed to the caller's `runJob`. */
export interface DaemonJob {
  /** The hub's job id. */
  jobId: string;
  /** The `run.start` payload. */
  payload: JsonObject;
  /**
   * Sends one run event to the hub (dropped once the job ended). A delta over
   * the frame limit is split; any other event is truncated to fit. `runner`
   * is the event's runner details (`relay/wire_events.ts`), sent beside it.
   */
  emit(event: JsonObject, runner?: JsonObject): void;
  /**
   * Sends one live ACP `session/update` to the hub as a `run.update` frame
   * (dropped once the job ended, or when it cannot fit a frame); absent
   * where no hub takes them.
   */
  update?(update: JsonObject): void;
  /** Aborted on `run.cancel` or disconnect. */
  signal: AbortSignal;
  /**
   * Sends an MCP message to the hub; resolves with its answer (`null` for
   * notifications). `timeoutMs` overrides the client's MCP timeout.
   */
  mcp(payload: Json, timeoutMs?: number): Promise<Json>;
  /** The optional capabilities the hub confirmed in `daemon.ready`. */
  hubCapabilities: readonly string[];
  /**
   * Registers the job's receiver of `run.permission` answers (interactive
   * approvals); only called when the hub confirmed `permission.ask`.
   */
  onPermissionAnswer(
    receive: (requestId: string, answer: JsonObject) => void,
  ): void;
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

/** One connection's state. */
export interface Session {
  /** The socket to the hub. */
  ws: WebSocket;
  /** Whether the hub answered the hello with `daemon.ready`. */
  ready: boolean;
  /** The jobs running on this connection. */
  jobs: Map<string, SessionJob>;
  /** The optional capabilities the hub confirmed in `daemon.ready`. */
  hubCapabilities: readonly string[];
  /** The jobs' MCP requests awaiting the hub's answer. */
  mcp: McpRequests;
  /** Set when a job's cleanup was not confirmed. */
  cleanupFailed: boolean;
}

/** Sends a frame while the socket is open; returns whether it was sent. */
export function send(session: Session, frame: DaemonFrame | string): boolean {
  if (session.ws.readyState !== WebSocket.OPEN) return false;
  session.ws.send(typeof frame === "string" ? frame : encodeDaemonFrame(frame));
  return true;
}

/** Options of {@linkcode startJob}. */
export interface StartJobOptions {
  /** The hub's job id. */
  jobId: string;
  /** The `run.start` payload. */
  payload: JsonObject;
  /** Runs one job until it ended and its processes are gone. */
  runJob: (job: DaemonJob) => Promise<DaemonJobResult>;
  /** Receives log records. */
  log: (entry: DaemonLogEntry) => void;
}

/** Starts a job of the session; it leaves `session.jobs` once reported. */
export function startJob(session: Session, options: StartJobOptions): void {
  const { jobId, log } = options;
  const controller = new AbortController();
  const job: SessionJob = { controller, done: Promise.resolve() };
  const events = createJobEvents(session, { jobId, log });
  const mcp = (message: Json, timeoutMs?: number) =>
    session.mcp.request(jobId, message, timeoutMs);
  const done = (async () => {
    let confirmed = true;
    let failure: unknown;
    try {
      ({ cleanupConfirmed: confirmed } = await options.runJob({
        jobId,
        payload: options.payload,
        emit: events.emit,
        update: events.update,
        signal: controller.signal,
        mcp,
        hubCapabilities: session.hubCapabilities,
        onPermissionAnswer(receive) {
          job.answerPermission = receive;
        },
      }));
    } catch (error) {
      failure = error;
    }
    events.close();
    reportJobEnd(session, {
      jobId,
      log,
      confirmed,
      signal: controller.signal,
      failure,
    });
  })().finally(() => session.jobs.delete(jobId));
  job.done = done;
  session.jobs.set(jobId, job);
}

/** A job running on a connection. */
export interface SessionJob {
  /** Aborted on `run.cancel` or disconnect. */
  controller: AbortController;
  /** Settles once the job ended and was reported. */
  done: Promise<void>;
  /** Hands a `run.permission` answer to the job, once it registered. */
  answerPermission?: (requestId: string, answer: JsonObject) => void;
}

/** A job's event sender: sends until it is closed. */
function createJobEvents(
  session: Session,
  options: Pick<StartJobOptions, "jobId" | "log">,
): {
  emit(event: JsonObject, runner?: JsonObject): void;
  update(update: JsonObject): void;
  close(): void;
} {
  const { jobId, log } = options;
  let open = true;
  return {
    emit(event, runner) {
      if (!open) return;
      const frames = encodeEventFrames(jobId, event, MAX_FRAME_BYTES, runner);
      for (const text of frames) {
        if (isOversizedFrame(text)) {
          const type = String(event.type);
          log({
            level: "error",
            message: `dropped a ${type} event that cannot be cut to fit 1 MiB`,
            jobId,
          });
          continue;
        }
        send(session, text);
      }
    },
    update(update) {
      if (!open) return;
      const text = encodeDaemonFrame({
        type: "run.update",
        job_id: jobId,
        update,
      });
      if (isOversizedFrame(text)) {
        log({
          level: "warn",
          message: `dropped a ${
            String(update.sessionUpdate)
          } update that does not fit 1 MiB`,
          jobId,
        });
        return;
      }
      send(session, text);
    },
    close() {
      open = false;
    },
  };
}

/** How a job ended. */
interface JobEnd {
  jobId: string;
  log: (entry: DaemonLogEntry) => void;
  /** The job's `cleanupConfirmed` (true when `runJob` threw). */
  confirmed: boolean;
  /** The job's signal: aborted when the job was cancelled. */
  signal: AbortSignal;
  /** What `runJob` threw, if it did. */
  failure: unknown;
}

/**
 * Tells the hub how a job ended and that it finished; an unconfirmed cleanup
 * halts the daemon instead.
 */
function reportJobEnd(session: Session, end: JobEnd): void {
  const { jobId, log } = end;
  if (!end.confirmed) {
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
  if (end.signal.aborted) {
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
  } else if (end.failure !== undefined) {
    const error = end.failure instanceof Error
      ? end.failure.message
      : String(end.failure);
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
}
