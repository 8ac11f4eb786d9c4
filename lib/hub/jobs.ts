/**
 * The hub's job side of `coding-relay-v1`: starting a job on a daemon's socket,
 * forwarding its events, settling it (finish, cancel, disconnect) and fencing
 * the daemon ID when cleanup stays unconfirmed. Used by `relay_hub.ts`.
 *
 * @module
 */

import { sharedCapabilities } from "./capabilities.ts";
import { RunnerError } from "../errors.ts";
import type { RunEvent } from "../events.ts";
import type { FenceStore } from "./fences.ts";
import {
  type HubFrame,
  type JsonObject,
  MAX_JOBS,
  PERMISSION_ASK_CAPABILITY,
  randomUrlSafe,
} from "../relay.ts";

/** One log record of the hub (never contains the token). */
export interface HubLogEntry {
  /** Severity. */
  level: "info" | "warn" | "error";
  /** What happened. */
  message: string;
  /** The daemon concerned, if any. */
  daemonId?: string;
  /** The job concerned, if any. */
  jobId?: string;
}

/** One accepted daemon socket (an "incarnation" of a daemon ID). */
export interface HubConnection {
  daemonId: string;
  ws: WebSocket;
  metadata: JsonObject;
  connectedAt: number;
  lastSeenAt: number;
  activeJobs: Set<string>;
}

/** How a job started on a daemon was settled. */
export type RelayJobOutcome =
  /** The daemon sent `run.finished` on its own. */
  | "finished"
  /** The caller cancelled and the daemon acknowledged with `run.finished`. */
  | "cancelled"
  /** The caller cancelled and no `run.finished` came in time: the ID is fenced. */
  | "cancel_timeout"
  /** The socket dropped mid-job: `run.failed` was delivered, the ID is fenced. */
  | "disconnected";

/** What {@linkcode runRelayJob} resolves with. */
export interface RelayJobResult {
  /** The hub's job id. */
  jobId: string;
  /** How the job ended. */
  outcome: RelayJobOutcome;
}

/** Options of a hub job (see `RelayHub.runJob`). */
export interface RunJobOptions {
  /** The daemon to run on. */
  daemonId: string;
  /** The run id added to every forwarded event. */
  runId: string;
  /**
   * The `run.start` payload (`run_id` is added first when missing), or a
   * function of the optional capabilities the daemon and this hub share.
   */
  payload: JsonObject | ((capabilities: readonly string[]) => JsonObject);
  /** Called once `run.start` is sent: what the job can take besides cancel. */
  onStarted?: (job: StartedJob) => void;
  /** Receives the job's events, each with `run_id`, and the frame's `runner` details. */
  onEvent: (event: RunEvent, runner?: JsonObject) => void;
  /** Receives the job's live ACP `session/update`s (`run.update`, `session.update` capability). */
  onUpdate?: (update: JsonObject) => void;
  /** Cancels the job (sends `run.cancel`, waits for the acknowledgement). */
  signal?: AbortSignal;
  /** How long to wait for the daemon to come online. */
  connectTimeoutMs: number;
}

/** A job whose `run.start` went out. */
export interface StartedJob {
  /** The hub's job id. */
  jobId: string;
  /** The optional capabilities the daemon and this hub share. */
  capabilities: readonly string[];
  /**
   * Sends a person's answer to one of the job's permission requests
   * (`permission.ask` only); false when the job is over.
   */
  answerPermission(requestId: string, answer: JsonObject): boolean;
}

/** A job in flight. */
export interface JobSession {
  jobId: string;
  runId: string;
  daemonId: string;
  owner: HubConnection;
  onEvent: (event: RunEvent, runner?: JsonObject) => void;
  onUpdate?: (update: JsonObject) => void;
  cancelling: boolean;
  done: boolean;
  sawTerminal: boolean;
  ended: PromiseWithResolvers<"finished" | "disconnected">;
  stop: AbortController;
}

/** The hub state the job functions work on. */
export interface HubCore {
  connections: Map<string, HubConnection>;
  jobs: Map<string, JobSession>;
  fences: FenceStore;
  cancelTimeoutMs: number;
  /** Jobs one daemon ID may run at once. */
  maxJobsPerDaemon: number;
  closed: boolean;
  send(connection: HubConnection, frame: HubFrame): boolean;
  log(entry: HubLogEntry): void;
  /** Resolves at the next connect, fence or close. */
  nextChange(): Promise<void>;
}

const DISCONNECTED_ERROR =
  "daemon disconnected; remote cleanup unconfirmed, target fenced";

/** The error for a fenced ID (the Python hub's exact message). */
export function fencedError(daemonId: string): RunnerError {
  return new RunnerError(
    "agent_runtime.daemon_fenced",
    `daemon ${daemonId} fenced: cleanup unconfirmed; stop remote jobs before restarting this worker`,
  );
}

function abortPromise(signal: AbortSignal): Promise<"aborted"> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve("aborted");
    else {signal.addEventListener("abort", () => resolve("aborted"), {
        once: true,
      });}
  });
}

async function waitForDaemon(
  core: HubCore,
  options: RunJobOptions,
  stop: AbortSignal,
): Promise<HubConnection> {
  const { daemonId } = options;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timedOut = new Promise<"timeout">((resolve) => {
    timer = setTimeout(
      () => resolve("timeout"),
      Math.max(0, options.connectTimeoutMs),
    );
  });
  try {
    while (true) {
      if (core.fences.has(daemonId)) throw fencedError(daemonId);
      const connection = core.connections.get(daemonId);
      if (connection) return connection;
      if (core.closed || stop.aborted) break;
      const woke = await Promise.race([
        core.nextChange(),
        timedOut,
        abortPromise(stop),
      ]);
      if (woke === "timeout") break;
    }
  } finally {
    clearTimeout(timer);
  }
  if (stop.aborted) {
    throw new RunnerError(
      "run.cancelled",
      "The run was cancelled while waiting for the daemon.",
    );
  }
  throw new RunnerError(
    "agent_runtime.daemon_offline",
    `daemon ${daemonId} is not connected; start the daemon on its machine with this daemon ID and token, then retry`,
  );
}

/** Delivers `event` to the job's caller with the run id filled in. */
export function deliverEvent(
  core: HubCore,
  session: JobSession,
  event: JsonObject,
  runner?: JsonObject,
): void {
  const withRunId =
    ("run_id" in event
      ? { ...event, run_id: session.runId }
      : { run_id: session.runId, ...event }) as unknown as RunEvent;
  if (withRunId.type === "run.completed" || withRunId.type === "run.failed") {
    session.sawTerminal = true;
  }
  try {
    session.onEvent(withRunId, runner);
  } catch (error) {
    core.log({
      level: "error",
      message: `run event handler failed: ${
        error instanceof Error ? error.message : error
      }`,
      daemonId: session.daemonId,
      jobId: session.jobId,
    });
  }
}

/** Delivers one live `session/update` of a job to its caller (none: dropped). */
export function deliverUpdate(
  core: HubCore,
  session: JobSession,
  update: JsonObject,
): void {
  try {
    session.onUpdate?.(update);
  } catch (error) {
    core.log({
      level: "error",
      message: `run update handler failed: ${
        error instanceof Error ? error.message : error
      }`,
      daemonId: session.daemonId,
      jobId: session.jobId,
    });
  }
}

/** Fails and fences every unfinished job of a socket that just closed. */
export function failDisconnectedJobs(
  core: HubCore,
  connection: HubConnection,
): void {
  for (const jobId of connection.activeJobs) {
    const session = core.jobs.get(jobId);
    if (!session || session.done) continue;
    core.fences.add(connection.daemonId);
    if (!session.cancelling) {
      session.cancelling = true;
      deliverEvent(core, session, {
        type: "run.failed",
        data: {
          error: DISCONNECTED_ERROR,
          code: "agent_runtime.daemon_disconnected",
          retryable: false,
        },
      });
    }
    session.ended.resolve("disconnected");
  }
}

/**
 * Runs one job on a daemon: waits for it, reserves a job slot, persists the
 * marker, sends `run.start`, forwards events until `run.finished`, and settles
 * on cancel or disconnect. Rejects only before `run.start` (offline, fenced,
 * busy, cancelled while waiting).
 */
export async function runRelayJob(
  core: HubCore,
  options: RunJobOptions,
): Promise<RelayJobResult> {
  const stop = new AbortController();
  const onCallerAbort = () => stop.abort();
  options.signal?.addEventListener("abort", onCallerAbort, { once: true });
  try {
    if (options.signal?.aborted) stop.abort();
    const owner = await waitForDaemon(core, options, stop.signal);
    if (core.jobs.size >= MAX_JOBS) {
      throw new RunnerError(
        "agent_runtime.daemon_busy",
        `daemon job capacity reached (${MAX_JOBS} jobs); retry when running jobs finish`,
      );
    }
    if (owner.activeJobs.size >= core.maxJobsPerDaemon) {
      throw new RunnerError(
        "agent_runtime.daemon_busy",
        `daemon ${options.daemonId} already runs ${core.maxJobsPerDaemon} jobs (the hub's per-daemon limit, --daemon-max-jobs-per-id); retry when they finish`,
      );
    }
    const session: JobSession = {
      jobId: randomUrlSafe(16),
      runId: options.runId,
      daemonId: options.daemonId,
      owner,
      onEvent: options.onEvent,
      onUpdate: options.onUpdate,
      cancelling: false,
      done: false,
      sawTerminal: false,
      ended: Promise.withResolvers(),
      stop,
    };
    core.jobs.set(session.jobId, session);
    owner.activeJobs.add(session.jobId);
    try {
      return {
        jobId: session.jobId,
        outcome: await driveJob(core, session, options),
      };
    } finally {
      await releaseJob(core, session);
    }
  } finally {
    options.signal?.removeEventListener("abort", onCallerAbort);
  }
}

async function driveJob(
  core: HubCore,
  session: JobSession,
  options: RunJobOptions,
): Promise<RelayJobOutcome> {
  try {
    await core.fences.ensureMarker(session.daemonId);
  } catch (error) {
    session.done = true;
    throw new RunnerError(
      "runner.internal",
      `cannot write the daemon's .pending marker; check the hub's state directory is writable`,
      { cause: error },
    );
  }
  const capabilities = sharedCapabilities(session.owner.metadata) ?? [];
  const given = typeof options.payload === "function"
    ? options.payload(capabilities)
    : options.payload;
  const payload = "run_id" in given
    ? given
    : { run_id: options.runId, ...given };
  core.send(session.owner, {
    type: "run.start",
    job_id: session.jobId,
    payload,
  });
  options.onStarted?.({
    jobId: session.jobId,
    capabilities,
    answerPermission(requestId, answer) {
      if (session.done || !capabilities.includes(PERMISSION_ASK_CAPABILITY)) {
        return false;
      }
      core.send(session.owner, {
        type: "run.permission",
        job_id: session.jobId,
        request_id: requestId,
        answer,
      });
      return true;
    },
  });
  const first = await Promise.race([
    session.ended.promise,
    abortPromise(session.stop.signal),
  ]);
  if (first === "disconnected") return "disconnected";
  if (first === "finished") {
    if (!session.sawTerminal) {
      deliverEvent(core, session, {
        type: "run.failed",
        data: {
          error:
            "the daemon finished the job without a terminal event; upgrade hub and daemon together",
          code: "relay.protocol_error",
          retryable: false,
        },
      });
    }
    return "finished";
  }
  return await cancelJob(core, session);
}

async function cancelJob(
  core: HubCore,
  session: JobSession,
): Promise<RelayJobOutcome> {
  session.cancelling = true;
  if (
    !core.send(session.owner, { type: "run.cancel", job_id: session.jobId })
  ) {
    core.fences.add(session.daemonId);
    return "disconnected";
  }
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timedOut = new Promise<"timeout">((resolve) => {
    timer = setTimeout(() => resolve("timeout"), core.cancelTimeoutMs);
  });
  try {
    const settled = await Promise.race([session.ended.promise, timedOut]);
    if (settled === "finished") return "cancelled";
    if (settled === "disconnected") return "disconnected";
  } finally {
    clearTimeout(timer);
  }
  core.fences.add(session.daemonId);
  core.log({
    level: "warn",
    message: "daemon did not acknowledge run.cancel in time; daemon ID fenced",
    daemonId: session.daemonId,
    jobId: session.jobId,
  });
  return "cancel_timeout";
}

async function releaseJob(core: HubCore, session: JobSession): Promise<void> {
  session.cancelling = true;
  core.jobs.delete(session.jobId);
  session.owner.activeJobs.delete(session.jobId);
  const idle = [...core.jobs.values()].every((job) =>
    job.daemonId !== session.daemonId
  );
  if (idle && !core.fences.has(session.daemonId)) {
    await core.fences.removeMarker(session.daemonId);
  }
}
