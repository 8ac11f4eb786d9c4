/**
 * The rules of a run's life, written once for every location: a run whose
 * agent the engine drives here or over SSH (`engine.ts`) and one whose turns
 * run as jobs on a daemon (`relayed_run.ts`). Exactly one terminal event,
 * the timeout and its one message, cancel, follow-ups queued for the next
 * turn and handed back when the run fails, the `run.failed` data
 * (`failure.ts`) and the run's result. See `docs/runs.md`.
 *
 * @module
 */

import { RunnerError, toRunnerError } from "../errors.ts";
import type { EventSink, RunUsage } from "../events.ts";
import { createEventEmitter, type EventEmitter } from "./events.ts";
import { failureEventData } from "./failure.ts";
import type { AnswerOutcome, PermissionAnswer } from "./permission_desk.ts";
import type { RunInput } from "./prompt.ts";
import { offerFollowUp, type SteerOutcome } from "./steering.ts";
import type { RunResult } from "./types.ts";

/** A running run, wherever its agent runs. */
export interface RunHandle {
  /** The run id. */
  readonly runId: string;
  /** Queues a follow-up for the next turn; "closed" means start a new run. */
  steer(input: RunInput): SteerOutcome;
  /** Cancels the run (`run.cancelled`), or ends it with another code. */
  cancel(reason?: RunnerError): void;
  /**
   * Answers an open permission request (`permission-decision=ask`); throws
   * `http.bad_request` for an option the agent did not offer.
   */
  answerPermission(requestId: string, answer: PermissionAnswer): AnswerOutcome;
  /** Resolves once the terminal event has been emitted. */
  readonly done: Promise<RunResult>;
}

/** Options for {@linkcode createRunLifecycle}. */
export interface RunLifecycleOptions {
  /** The run id stamped on every event. */
  runId: string;
  /** The conversation, when the run has one (enables follow-ups). */
  conversationId?: string;
  /** The run's `timeout` in seconds. */
  timeoutSeconds: number;
  /** Receives the run's numbered events. */
  emit: EventSink;
  /** Values redacted from the run's failure and its handed-back follow-ups. */
  secrets: readonly string[];
  /** Structured log lines (never secrets). */
  log: (entry: Record<string, unknown>) => void;
}

/** The state every run keeps, whatever drives its turns. */
export interface RunLifecycle {
  /** The run id. */
  readonly runId: string;
  /** The conversation, when the run has one. */
  readonly conversationId?: string;
  /** Values redacted from anything the run reports (a live list). */
  readonly secrets: readonly string[];
  /** Structured log lines (never secrets). */
  readonly log: (entry: Record<string, unknown>) => void;
  /** Numbers the run's events and lets only one terminal event through. */
  readonly emitter: EventEmitter;
  /** Follow-ups waiting for the next turn. */
  readonly queue: RunInput[];
  /** Whether the run takes no more follow-ups. */
  closed: boolean;
  /** Aborted on cancel or timeout; its reason is the run's failure. */
  readonly abort: AbortController;
  /** Rejects with the abort reason once the run is aborted. */
  readonly aborted: Promise<never>;
  /** Aborts the run with {@linkcode runTimeoutError} when it fires. */
  readonly runTimer: ReturnType<typeof setTimeout>;
  /** The agent session the run used, once one was established. */
  sessionId?: string;
  /**
   * What the agent reported so far: the turns' tokens added up, the last
   * context window and cost (`lib/events.ts`); on the terminal event.
   */
  usage?: RunUsage;
}

/** The failure of a run that outlived its `timeout` (one message for every location). */
export function runTimeoutError(timeoutSeconds: number): RunnerError {
  return new RunnerError(
    "run.timeout",
    `The run exceeded its timeout of ${timeoutSeconds} s. Raise timeout, or split the task.`,
  );
}

/** Starts a run's life: its event numbering and its timeout. */
export function createRunLifecycle(
  options: RunLifecycleOptions,
): RunLifecycle {
  const { log } = options;
  const abort = new AbortController();
  const runTimer = setTimeout(
    () => abort.abort(runTimeoutError(options.timeoutSeconds)),
    options.timeoutSeconds * 1000,
  );
  const aborted = new Promise<never>((_, reject) => {
    abort.signal.addEventListener("abort", () => reject(abort.signal.reason), {
      once: true,
    });
  });
  aborted.catch(() => {});
  return {
    runId: options.runId,
    conversationId: options.conversationId,
    secrets: options.secrets,
    log,
    emitter: createEventEmitter({
      runId: options.runId,
      sink: options.emit,
      onDropped: (event) =>
        log({ msg: "event after terminal event dropped", type: event.type }),
    }),
    queue: [],
    closed: false,
    abort,
    aborted,
    runTimer,
  };
}

/** Offers a follow-up to the run's next turn. */
export function steerRun(life: RunLifecycle, input: RunInput): SteerOutcome {
  return offerFollowUp(life, life.conversationId, input);
}

/** Ends the run with `reason` (default `run.cancelled`) unless it has ended. */
export function cancelRun(life: RunLifecycle, reason?: RunnerError): void {
  if (life.emitter.ended) return;
  life.abort.abort(
    reason ?? new RunnerError("run.cancelled", "The run was cancelled."),
  );
}

/** Emits `run.completed` with `data` and the run's usage, and returns the result. */
export function completeRun(
  life: RunLifecycle,
  data: Record<string, unknown>,
): RunResult {
  life.closed = true;
  life.emitter.emit("run.completed", data, life.usage);
  return { status: "completed", sessionId: life.sessionId };
}

/**
 * Emits `run.failed` (the abort reason wins over `error`), handing back the
 * follow-ups the run could not answer, and returns the result.
 */
export function failRun(
  life: RunLifecycle,
  error: unknown,
  options: { stderrTail?: string } = {},
): RunResult {
  const { abort, queue } = life;
  life.closed = true;
  const failure = toRunnerError(
    abort.signal.aborted ? abort.signal.reason : error,
  );
  if (queue.length) {
    life.log({ msg: "follow-ups not processed", count: queue.length });
  }
  life.emitter.emit(
    "run.failed",
    failureEventData({
      failure,
      stderrTail: options.stderrTail,
      unprocessed: queue.splice(0),
      secrets: life.secrets,
    }),
    life.usage, // what was counted before the failure
  );
  return resultOf(life, failure.code);
}

/** The result of a run that ended with `code`. */
function resultOf(life: RunLifecycle, code: string): RunResult {
  const status = code === "run.cancelled" ? "cancelled" : "failed";
  return { status, code, sessionId: life.sessionId };
}

/** How {@linkcode settleRun} runs a run and ends it after a failure. */
export interface RunSettling {
  /** Runs the run's turns; resolves with the result its terminal event gave. */
  execute(): Promise<RunResult>;
  /** Stops what the run started, after a failure and before `run.failed`. */
  teardown(): Promise<void>;
  /** The agent's (redacted) stderr tail, for `run.failed`. */
  stderrTail?(): string | undefined;
}

/**
 * Runs to the end: a failure (or cancel, or the timeout) becomes `run.failed`
 * after teardown; the timer stops either way.
 */
export async function settleRun(
  life: RunLifecycle,
  settling: RunSettling,
): Promise<RunResult> {
  try {
    return await settling.execute();
  } catch (error) {
    life.closed = true;
    await settling.teardown().catch((teardownError) =>
      life.log({
        msg: "teardown failed",
        error: toRunnerError(teardownError).message,
      })
    );
    return failRun(life, error, { stderrTail: settling.stderrTail?.() });
  } finally {
    clearTimeout(life.runTimer);
  }
}

/** The run's handle: follow-ups, cancel and answers go to `life` and `answer`. */
export function runHandleOf(
  life: RunLifecycle,
  { done, answerPermission }: {
    done: Promise<RunResult>;
    answerPermission: RunHandle["answerPermission"];
  },
): RunHandle {
  return {
    runId: life.runId,
    steer: (input) => steerRun(life, input),
    cancel: (reason) => cancelRun(life, reason),
    answerPermission,
    done,
  };
}
