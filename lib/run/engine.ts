/**
 * The run engine, written once: it turns a run request into ACP calls and a
 * stream of run events. It is handed a way to launch the agent (a location),
 * a stored session id, and an event sink; it knows nothing of HTTP, sockets
 * or the store. Session choice, prompt mapping, events, steering and
 * permissions live in this folder; this file wires a run's steps: start the
 * agent, run the turns (draining steering), tear down. See `docs/runs.md`.
 *
 * @module
 */

import { RunnerError, toRunnerError } from "../errors.ts";
import { createRunContext, type RunContext } from "./context.ts";
import type { AnswerOutcome, PermissionAnswer } from "./permission_desk.ts";
import type { RunInput } from "./prompt.ts";
import { offerFollowUp, type SteerOutcome } from "./steering.ts";
import { failRun, shutdown } from "./teardown.ts";
import { finalAnswer, runTurns } from "./turn.ts";
import type { RunEngineOptions, RunResult } from "./types.ts";
import { finishAgent, startOrAdoptAgent } from "./reuse.ts";

export type {
  AgentTransport,
  RunEngineOptions,
  RunResult,
  WarmAgent,
  WarmSlot,
} from "./types.ts";

export { STEERING_QUEUE_LIMIT, type SteerOutcome } from "./steering.ts";

/** A running run. */
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

/** Starts a run; its events go to `options.emit`. */
export function startRun(options: RunEngineOptions): RunHandle {
  const run = createRunContext(options);
  const done = settleRun(run);
  return {
    runId: options.runId,
    steer(input) {
      return offerFollowUp(run, options.conversationId, input);
    },
    cancel(reason) {
      if (run.closed && run.emitter.ended) return;
      run.abort.abort(
        reason ?? new RunnerError("run.cancelled", "The run was cancelled."),
      );
    },
    answerPermission(requestId, answer) {
      return run.permissions?.answer(requestId, answer) ?? "unknown";
    },
    done,
  };
}

/** Runs to the end; a failure becomes `run.failed` after teardown. */
async function settleRun(run: RunContext): Promise<RunResult> {
  try {
    return await executeRun(run);
  } catch (error) {
    run.closed = true;
    await shutdown(run).catch((teardownError) =>
      run.log({
        msg: "teardown failed",
        error: toRunnerError(teardownError).message,
      })
    );
    return failRun(run, error);
  } finally {
    clearTimeout(run.runTimer);
  }
}

/**
 * Starts (or adopts) the agent, runs the turns, tears down or keeps the
 * agent warm, and emits `run.completed`.
 */
async function executeRun(run: RunContext): Promise<RunResult> {
  const conn = await startOrAdoptAgent(run);
  const outcome = await runTurns(run, conn);
  run.closed = true;
  finalAnswer(outcome); // throws when the run ended without an answer
  await finishAgent(run);
  // The answer is the last turn's message.completed: a run.completed that
  // repeated it would put it on every stream a third time (LangBot's model
  // lets run.completed leave it out once a message.completed carried it).
  run.emitter.emit("run.completed", {
    finish_reason: outcome.stopReason,
  }, run.usage);
  return { status: "completed", sessionId: run.sessionId };
}
