/**
 * One `location=daemon` run on the hub side: the run's hub jobs, one after
 * another. Follow-ups wait until the current job ends and then run as further
 * jobs on the newest session; the caller sees one run with increasing
 * `sequence` numbers and exactly one terminal event, and a run that fails or
 * is cancelled hands its unprocessed follow-ups back. See `docs/daemon.md`.
 *
 * @module
 */

import type { McpServer } from "@agentclientprotocol/sdk";
import { parseMcpServersJson } from "../assets/mcp_servers_json.ts";
import type { AssetsHook, AttachedRunAssets } from "../assets/wiring.ts";
import { buildRunStartPayload } from "../relay/payload.ts";
import { fromRelayEvent, type RunnerDetails } from "../relay/wire_events.ts";
import { RunnerError, toRunnerError } from "../errors.ts";
import type { RunEvent } from "../events.ts";
import { createEventRestorer, isTerminalEvent } from "../events.ts";
import type { RelayHub, RelayJobOutcome } from "../hub/relay_hub.ts";
import type { StartedJob } from "../hub/jobs.ts";
import { buildPrompt, promptText, type RunInput } from "../run/prompt.ts";
import type { RunHandle, RunResult } from "../run/engine.ts";
import { offerFollowUp } from "../run/steering.ts";
import { TURN_STARTED, turnStartedData } from "../run/turn_started.ts";
import type { RelayedRunContext } from "../run/location.ts";
import {
  SESSION_SETTINGS_KEY,
  type SessionSettings,
  sessionSettingsFrom,
} from "../run/session_memory.ts";
import {
  createDaemonPermissions,
  type DaemonPermissions,
} from "./daemon_permissions.ts";
import { PERMISSION_ASK_CAPABILITY } from "../relay.ts";

/** Options of `createDaemonLocation` (`./daemon.ts`). */
export interface DaemonLocationOptions {
  /** The hub daemons connect to. */
  hub: RelayHub;
  /**
   * The assets layer: each run is attached (its `mcp.request`s are then
   * answered through `hubMcpHandlerFor`) and released at its end.
   */
  assets?: Pick<AssetsHook, "attachRun">;
  /** Structured log (never secrets); default: the run manager's run log. */
  log?: (entry: Record<string, unknown>) => void;
}

/** What the run manager hands a remote runner for one run. */
export type DaemonRunContext = RelayedRunContext;

/** One run's state, shared by the steps below. */
interface DaemonRun {
  options: DaemonLocationOptions;
  context: DaemonRunContext;
  daemonId: string;
  log: (entry: Record<string, unknown>) => void;
  /** Follow-ups waiting for the current job to end. */
  queue: RunInput[];
  stop: AbortController;
  cancelReason?: RunnerError;
  closed: boolean;
  terminal?: RunEvent;
  sequence: number;
  sessionId?: string;
  /** What the conversation remembers of its session's config values, as the jobs changed it. */
  sessionMemory?: SessionSettings;
  /** A `run.completed` held back while a follow-up job may continue the run. */
  held?: RunEvent;
  releaseAssets?: () => void;
  /** The permission requests the daemon's engine has open. */
  permissions: DaemonPermissions;
  /**
   * Puts back a completion's whole text where the wire left it out (daemon.py
   * sends `run.completed` without `message`) or cut it to fit a frame, and
   * drops `all_content`: the form the run's callers get.
   */
  complete: (event: RunEvent) => RunEvent;
  /** The current job, once its `run.start` went out. */
  startedJob?: StartedJob;
  /** Whether `permission.unavailable` was said already. */
  askUnavailableSaid?: boolean;
  /** Resolves once a timed-out run stops waiting for the daemon's acknowledgement. */
  givenUp: PromiseWithResolvers<void>;
}

/** Starts one run on the daemon `config.daemonId` names. */
export function startDaemonRun(
  options: DaemonLocationOptions,
  context: DaemonRunContext,
): RunHandle {
  const { runId, request } = context;
  const daemonId = request.config.daemonId ?? "";
  const run: DaemonRun = {
    options,
    context,
    daemonId,
    log: (entry) =>
      options.log
        ? options.log({ run_id: runId, daemon_id: daemonId, ...entry })
        : context.log({ daemon_id: daemonId, ...entry }),
    queue: [],
    stop: new AbortController(),
    closed: false,
    sequence: 0,
    sessionId: context.storedSessionId,
    sessionMemory: context.sessionMemory,
    permissions: createDaemonPermissions(),
    complete: createEventRestorer({ allContent: false }),
    givenUp: Promise.withResolvers<void>(),
  };
  // The hub enforces the run's timeout itself: a silent daemon cannot hold it.
  const timer = setTimeout(
    () => timeOut(run),
    request.config.timeout * 1000,
  );
  const done = runJobs(run)
    .then(() => requireTerminal(run))
    .catch((error) => failRun(run, error))
    .then(() => finishRun(run))
    .finally(() => clearTimeout(timer));
  return {
    runId,
    steer: (input) => offerFollowUp(run, request.conversationId, input),
    cancel(reason) {
      cancelRun(
        run,
        reason ?? new RunnerError("run.cancelled", "The run was cancelled."),
      );
    },
    answerPermission: (requestId, answer) =>
      run.permissions.answer(
        requestId,
        answer,
        (id, sent) => run.startedJob?.answerPermission(id, sent) ?? false,
      ),
    done,
  };
}

/** Cancels the current job (the hub sends `run.cancel`) with `reason`. */
function cancelRun(run: DaemonRun, reason: RunnerError): void {
  if (run.terminal || run.cancelReason) return;
  run.cancelReason = reason;
  run.closed = true;
  run.stop.abort();
}

/**
 * Ends a run past its `timeout`: cancels the job, and stops waiting for the
 * daemon's acknowledgement after `cancel-grace` (the hub keeps waiting for it
 * in the background and fences the daemon ID if it never comes).
 */
function timeOut(run: DaemonRun): void {
  if (run.terminal || run.cancelReason) return;
  const { timeout, cancelGrace } = run.context.request.config;
  cancelRun(
    run,
    new RunnerError(
      "run.timeout",
      `The run took longer than its timeout of ${timeout} s and was cancelled on daemon ${run.daemonId}. Raise timeout, or split the task.`,
    ),
  );
  run.log({ msg: "daemon run timed out", timeout_s: timeout });
  setTimeout(() => run.givenUp.resolve(), cancelGrace * 1000);
}

/** Emits an event as the run's next one; a terminal event ends the run. */
function forward(run: DaemonRun, event: RunEvent): void {
  if (run.terminal) return;
  if (isTerminalEvent(event)) {
    run.closed = true;
    if (event.type === "run.failed" && run.queue.length) {
      // Follow-ups the run could not answer go back to the caller.
      event = {
        ...event,
        data: {
          ...event.data,
          unprocessed_inputs: run.queue.map((input) => ({
            text: input.text ?? "",
          })),
        },
      };
      run.log({ msg: "follow-ups not processed", count: run.queue.length });
    }
    run.queue.length = 0;
    run.terminal = event;
  }
  run.context.emit({
    ...event,
    run_id: run.context.runId,
    sequence: ++run.sequence,
    timestamp: event.timestamp ?? Date.now(),
  });
}

/** Takes one event of the current job (from our daemon or daemon.py). */
function onJobEvent(
  run: DaemonRun,
  wireEvent: RunEvent,
  runner?: RunnerDetails,
): void {
  if (run.terminal) return;
  const event = run.complete(fromRelayEvent(wireEvent, runner));
  run.permissions.observe(event);
  if (
    event.type === "state.updated" &&
    event.data.key === "external.acp_session_id" &&
    typeof event.data.value === "string"
  ) {
    run.sessionId = event.data.value;
  }
  if (
    event.type === "state.updated" && event.data.key === SESSION_SETTINGS_KEY
  ) {
    run.sessionMemory = sessionSettingsFrom(event.data.value);
  }
  if (event.type === "run.completed" && run.queue.length && !run.cancelReason) {
    run.held = event; // folded: a follow-up job continues this run
    return;
  }
  forward(run, event);
}

/** Runs the first job and then one job per follow-up, until none is left. */
async function runJobs(run: DaemonRun): Promise<void> {
  const { runId, request } = run.context;
  const attached = run.options.assets?.attachRun({ runId, request });
  run.releaseAssets = attached?.release;
  const mcpServers = hubMcpServers(run, attached);
  let input = request.input;
  let followUp = false;
  let turn = 1;
  for (;;) {
    if (run.cancelReason) throw run.cancelReason;
    run.held = undefined;
    const outcome = await runOneJob(run, {
      input,
      followUp,
      mcpServers,
      promptPrefix: followUp ? undefined : attached?.promptPrefix,
    });
    run.log({ msg: "daemon job ended", outcome, follow_up: followUp });
    if (run.terminal) return;
    throwUnlessEnded(run, outcome);
    const next = run.held ? run.queue.shift() : undefined;
    if (!next) {
      if (run.held) forward(run, run.held);
      return;
    }
    run.log({ msg: "steering: next daemon job", queued: run.queue.length });
    // The daemon's engine runs each job as a first turn: the hub says which
    // turn of the run it is, as the local engine does.
    turn += 1;
    forward(run, {
      run_id: runId,
      type: TURN_STARTED,
      data: turnStartedData(turn, next, run.context.secrets),
    });
    input = followUpInput(next);
    followUp = true;
  }
}

function hubMcpServers(
  run: DaemonRun,
  attached: AttachedRunAssets | undefined,
): McpServer[] {
  const { config } = run.context.request;
  // The agent's MCP capabilities are unknown on the hub: send every server.
  const transports = { http: true, sse: true };
  return attached
    ? attached.sessionMcpServers(transports)
    : config.mcpServersJson
    ? parseMcpServersJson(config.mcpServersJson, transports)
    : [];
}

/** What one job of the run sends. */
interface JobSpec {
  input: RunInput;
  followUp: boolean;
  mcpServers: McpServer[];
  promptPrefix?: string;
}

/** Runs one hub job; a cancelled run throws its cancel reason instead. */
async function runOneJob(
  run: DaemonRun,
  spec: JobSpec,
): Promise<RelayJobOutcome> {
  const { runId, request: { config } } = run.context;
  try {
    const job = run.options.hub.runJob({
      daemonId: run.daemonId,
      runId,
      payload: (capabilities) =>
        buildRunStartPayload({
          runId,
          input: spec.input,
          config,
          storedSessionId: run.sessionId,
          sessionMemory: run.sessionMemory as
            | Record<string, unknown>
            | undefined,
          reuseSession: spec.followUp ? true : undefined,
          mcpServers: spec.mcpServers,
          promptPrefix: spec.promptPrefix,
          askAllowed: askAllowed(run, capabilities),
        }),
      onStarted: (started) => {
        run.startedJob = started;
      },
      onEvent: (event, runner) => onJobEvent(run, event, runner),
      signal: run.stop.signal,
      connectTimeoutMs: config.daemonConnectTimeout * 1000,
    });
    const ended = await Promise.race([job, run.givenUp.promise]);
    if (!ended) {
      run.log({
        msg: "daemon did not acknowledge the timeout's cancel in time",
      });
      throw run.cancelReason;
    }
    return ended.outcome;
  } catch (error) {
    throw run.cancelReason ?? error;
  }
}

/** Throws when a job without a terminal event ended other than normally. */
function throwUnlessEnded(run: DaemonRun, outcome: RelayJobOutcome): void {
  if (run.cancelReason?.code === "run.timeout") throw run.cancelReason;
  if (outcome === "cancel_timeout") {
    throw new RunnerError(
      "agent_runtime.daemon_disconnected",
      `daemon ${run.daemonId} did not confirm the cancel in time; the daemon ID is fenced. Check on its machine that no agent process of this run is left, then run \`runner daemons unfence ${run.daemonId} --yes\`.`,
    );
  }
  if (outcome === "cancelled" || run.cancelReason) {
    throw run.cancelReason ?? new RunnerError(
      "runner.shutting_down",
      "The hub is shutting down; the daemon job was cancelled. Retry the run.",
    );
  }
}

function requireTerminal(run: DaemonRun): void {
  if (!run.terminal) {
    throw new RunnerError(
      "relay.protocol_error",
      "the daemon job ended without a terminal event; upgrade hub and daemon together",
    );
  }
}

function failRun(run: DaemonRun, error: unknown): void {
  const failure = toRunnerError(error);
  forward(run, {
    run_id: run.context.runId,
    type: "run.failed",
    data: {
      error: failure.message,
      code: failure.code,
      retryable: failure.retryable,
    },
  });
}

function finishRun(run: DaemonRun): RunResult {
  run.closed = true;
  run.releaseAssets?.();
  const { terminal, sessionId } = run;
  if (terminal?.type === "run.completed") {
    return { status: "completed", sessionId };
  }
  const code = String(terminal?.data.code ?? "runner.internal");
  return {
    status: code === "run.cancelled" ? "cancelled" : "failed",
    code,
    sessionId,
  };
}

/**
 * A follow-up job carries text only, like a follow-up turn of the local
 * engine: its attachments are named in a note appended to the text.
 */
function followUpInput(input: RunInput): RunInput {
  try {
    const { blocks } = buildPrompt({
      input,
      capabilities: undefined,
      followUp: true,
    });
    return { text: promptText(blocks) };
  } catch {
    return { text: input.text ?? "" }; // buildPrompt refuses an empty input
  }
}

/**
 * Whether this job may ask a person: the daemon confirmed `permission.ask`.
 * When `ask` was wanted but cannot be carried, says so once in a
 * `permission.unavailable` event (the daemon then gets the fallback).
 */
function askAllowed(
  run: DaemonRun,
  capabilities: readonly string[],
): boolean {
  const { config, permissionAskUnavailable } = run.context.request;
  if (config.permissionDecision !== "ask") return false;
  const reason = permissionAskUnavailable ??
    (capabilities.includes(PERMISSION_ASK_CAPABILITY)
      ? undefined
      : `daemon ${run.daemonId} cannot ask a person (no permission.ask capability, e.g. LangBot's daemon.py)`);
  if (!reason) return true;
  if (!run.askUnavailableSaid) {
    run.askUnavailableSaid = true;
    forward(run, {
      run_id: run.context.runId,
      type: "permission.unavailable",
      data: { reason, fallback: config.permissionFallback },
    });
  }
  return false;
}
