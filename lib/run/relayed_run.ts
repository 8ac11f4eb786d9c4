/**
 * A run whose turns run where the agent's own engine is (a daemon): each
 * turn is one `AgentLocation.runTurn` (on a daemon, one hub job), its events
 * streamed into the run. The run's life is `lifecycle.ts`'s, as for a run
 * the engine drives here: one terminal event, the timeout, cancel, the
 * `run.failed` data and the result. Follow-ups wait until the current turn
 * ends and then run as further turns on the newest session (text only, like
 * the engine's follow-up turns); the caller sees one run with increasing
 * `sequence` numbers. See `docs/daemon.md`.
 *
 * @module
 */

import { addUsage, type RunEvent, usageFrom } from "../events.ts";
import { handedBackInputs } from "./failure.ts";
import {
  completeRun,
  createRunLifecycle,
  type RunHandle,
  runHandleOf,
  type RunLifecycle,
  settleRun,
} from "./lifecycle.ts";
import type { AgentLocation, RelayedTurn } from "./location.ts";
import type { PermissionAnswer } from "./permission_desk.ts";
import { buildPrompt, promptText, type RunInput } from "./prompt.ts";
import {
  createRelayedPermissions,
  type RelayedPermissions,
} from "./relayed_permissions.ts";
import type { RunRequest } from "./request.ts";
import {
  SESSION_SETTINGS_KEY,
  type SessionSettings,
  sessionSettingsFrom,
} from "./session_memory.ts";
import { TURN_STARTED, turnStartedData } from "./turn_started.ts";
import type { RunResult } from "./types.ts";

/** Options for {@linkcode startRelayedRun}. */
export interface RelayedRunOptions {
  /** The run id. */
  runId: string;
  /** The run request. */
  request: RunRequest;
  /** Where each turn runs (its `runTurn`). */
  location: Required<Pick<AgentLocation, "runTurn">>;
  /** The session the store holds for the conversation. */
  storedSessionId?: string;
  /** What the conversation remembers of its session's config values. */
  sessionMemory?: SessionSettings;
  /** Values to redact from the run's events and logs. */
  secrets: readonly string[];
  /** Receives the run's events in order. */
  emit: (event: RunEvent) => void;
  /** Structured log (redacted). */
  log: (entry: Record<string, unknown>) => void;
}

/** One relayed run's state, shared by the steps below. */
interface RelayedRun {
  life: RunLifecycle;
  options: RelayedRunOptions;
  /** What the conversation remembers, as the turns changed it. */
  sessionMemory?: SessionSettings;
  /** The open permission requests of the current turn. */
  permissions: RelayedPermissions;
  /** Sends an answer to the current turn's permission request. */
  send?: (requestId: string, answer: PermissionAnswer) => boolean;
  /** A turn's `run.completed` held back while a follow-up turn continues the run. */
  held?: RunEvent;
  /** How the run ended, once its terminal event went out. */
  ended?: RunResult;
  /** Whether `permission.unavailable` was said already. */
  askUnavailableSaid: boolean;
}

/** Starts a run whose turns run at `options.location`. */
export function startRelayedRun(options: RelayedRunOptions): RunHandle {
  const { runId, request } = options;
  const life = createRunLifecycle({
    runId,
    conversationId: request.conversationId,
    timeoutSeconds: request.config.timeout,
    emit: options.emit,
    secrets: options.secrets,
    log: options.log,
  });
  life.sessionId = options.storedSessionId;
  const run: RelayedRun = {
    life,
    options,
    sessionMemory: options.sessionMemory,
    permissions: createRelayedPermissions(),
    askUnavailableSaid: false,
  };
  const { config, permissionAskUnavailable } = request;
  if (config.permissionDecision === "ask" && permissionAskUnavailable) {
    sayAskUnavailable(run, permissionAskUnavailable);
  }
  const done = settleRun(life, {
    execute: () => runTurns(run),
    teardown: () => Promise.resolve(),
  });
  return runHandleOf(life, {
    done,
    answerPermission: (requestId, answer) =>
      run.permissions.answer(
        requestId,
        answer,
        (id, sent) => run.send?.(id, sent) ?? false,
      ),
  });
}

/** Runs the first turn and then one turn per follow-up, until none is left. */
async function runTurns(run: RelayedRun): Promise<RunResult> {
  const { life } = run;
  let input = run.options.request.input;
  let followUp = false;
  let turn = 1;
  for (;;) {
    if (life.abort.signal.aborted) throw life.abort.signal.reason;
    const held = await runOneTurn(run, input, followUp);
    if (run.ended) return run.ended;
    if (life.abort.signal.aborted) throw life.abort.signal.reason;
    if (!held) throw new Error("a turn ended without its terminal event");
    const next = life.queue.shift();
    if (!next) return completeRun(life, held.data);
    life.log({ msg: "steering: next turn", queued: life.queue.length });
    // The remote engine runs each turn as a first turn: this side says
    // which turn of the run it is, as the engine does.
    turn += 1;
    life.emitter.emit(TURN_STARTED, turnStartedData(turn, next, life.secrets));
    input = followUpInput(next);
    followUp = true;
  }
}

/**
 * Runs one turn at the location; returns its `run.completed` when held back
 * for a follow-up. After the timeout, stops waiting for it
 * after `cancel-grace` (a daemon's hub keeps waiting for the acknowledgement
 * in the background and fences the daemon ID if it never comes).
 */
async function runOneTurn(
  run: RelayedRun,
  input: RunInput,
  followUp: boolean,
): Promise<RunEvent | undefined> {
  const { life, options } = run;
  run.held = undefined;
  const givenUp = Promise.withResolvers<"given up">();
  let graceTimer: ReturnType<typeof setTimeout> | undefined;
  const onAbort = () => {
    if (life.abort.signal.reason?.code !== "run.timeout") return;
    life.log({
      msg: "relayed run timed out",
      timeout_s: options.request.config.timeout,
    });
    graceTimer = setTimeout(
      () => givenUp.resolve("given up"),
      options.request.config.cancelGrace * 1000,
    );
  };
  life.abort.signal.addEventListener("abort", onAbort, { once: true });
  if (life.abort.signal.aborted) onAbort();
  const turn: RelayedTurn = {
    runId: options.runId,
    request: options.request,
    input,
    followUp,
    sessionId: life.sessionId,
    sessionMemory: run.sessionMemory,
    emit: (event) => onTurnEvent(run, event),
    askUnavailable: (reason) => sayAskUnavailable(run, reason),
    answers: (send) => run.send = send,
    signal: life.abort.signal,
    log: life.log,
  };
  try {
    const ended = await Promise.race([
      options.location.runTurn(turn),
      givenUp.promise,
    ]);
    if (ended === "given up") {
      life.log({
        msg: "the turn did not end within cancel-grace of the timeout",
      });
    }
  } catch (error) {
    // A turn that already ended the run, or was cancelled, says no more.
    if (!run.ended && !life.abort.signal.aborted) throw error;
  } finally {
    clearTimeout(graceTimer);
    life.abort.signal.removeEventListener("abort", onAbort);
    run.send = undefined;
  }
  return run.held;
}

/** Takes one event of the current turn. */
function onTurnEvent(run: RelayedRun, event: RunEvent): void {
  const { life } = run;
  if (life.emitter.ended) return;
  run.permissions.observe(event);
  if (event.type === "state.updated") noteState(run, event);
  if (event.type === "run.completed" || event.type === "run.failed") {
    // Each job is one turn: its usage is the turn's, added to the run's.
    life.usage = addUsage(life.usage, usageFrom(event.usage));
  }
  if (event.type === "run.completed") {
    if (life.queue.length && !life.abort.signal.aborted) {
      run.held = event; // folded: a follow-up turn continues this run
      return;
    }
    run.ended = completeRun(life, event.data);
    return;
  }
  if (event.type === "run.failed") {
    run.ended = forwardFailure(run, event);
    return;
  }
  life.emitter.emit(event.type, event.data);
}

/** Follows the session id and the remembered session config values. */
function noteState(run: RelayedRun, event: RunEvent): void {
  const { key, value } = event.data;
  if (key === "external.acp_session_id" && typeof value === "string") {
    run.life.sessionId = value;
  }
  if (key === SESSION_SETTINGS_KEY) {
    run.sessionMemory = sessionSettingsFrom(value);
  }
}

/** Emits the turn's own `run.failed`, handing back the follow-ups. */
function forwardFailure(run: RelayedRun, event: RunEvent): RunResult {
  const { life } = run;
  life.closed = true;
  const data = { ...event.data };
  if (life.queue.length) {
    life.log({ msg: "follow-ups not processed", count: life.queue.length });
    data.unprocessed_inputs = handedBackInputs(
      life.queue.splice(0),
      life.secrets,
    );
  }
  life.emitter.emit("run.failed", data, life.usage);
  const code = String(data.code ?? "runner.internal");
  return {
    status: code === "run.cancelled" ? "cancelled" : "failed",
    code,
    sessionId: life.sessionId,
  };
}

/** Says once why `ask` cannot be carried (the fallback applies). */
function sayAskUnavailable(run: RelayedRun, reason: string): void {
  if (run.askUnavailableSaid) return;
  run.askUnavailableSaid = true;
  run.life.emitter.emit("permission.unavailable", {
    reason,
    fallback: run.options.request.config.permissionFallback,
  });
}

/**
 * A follow-up turn carries text only, like a follow-up turn of the engine:
 * its attachments are named in a note appended to the text.
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
