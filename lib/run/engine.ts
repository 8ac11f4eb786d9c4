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

import { createRunContext, type RunContext } from "./context.ts";
import {
  completeRun,
  type RunHandle,
  runHandleOf,
  settleRun,
} from "./lifecycle.ts";
import { shutdown } from "./teardown.ts";
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
export type { RunHandle } from "./lifecycle.ts";

export { STEERING_QUEUE_LIMIT, type SteerOutcome } from "./steering.ts";

/** Starts a run; its events go to `options.emit`. */
export function startRun(options: RunEngineOptions): RunHandle {
  const run = createRunContext(options);
  const done = settleRun(run, {
    execute: () => executeRun(run),
    teardown: () => shutdown(run),
    stderrTail: () => run.transport?.stderrTail(),
  });
  return runHandleOf(run, {
    done,
    answerPermission: (requestId, answer) =>
      run.permissions?.answer(requestId, answer) ?? "unknown",
  });
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
  return completeRun(run, { finish_reason: outcome.stopReason });
}
