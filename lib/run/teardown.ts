/**
 * The end of a run: stopping the agent, and reporting a failure as the
 * run's terminal `run.failed` event.
 *
 * @module
 */

import { toRunnerError } from "../errors.ts";
import { settleWithin } from "../timing.ts";
import type { RunContext } from "./context.ts";
import { failureEventData } from "./failure.ts";
import type { RunResult } from "./types.ts";

/** How long teardown waits for an agent whose launch outlived the run. */
const LATE_LAUNCH_WAIT_MS = 10_000;

/**
 * Stops the run timer, kills the run's client terminals, closes the
 * connection and tears the agent down.
 */
export async function shutdown(run: RunContext): Promise<void> {
  clearTimeout(run.runTimer);
  await run.terminals?.closeAll();
  run.connection?.close();
  await run.transport?.teardown();
  if (run.lateTeardown) {
    await settleWithin(run.lateTeardown, LATE_LAUNCH_WAIT_MS);
  }
}

/** Emits `run.failed` (the abort reason wins over `error`) and returns the result. */
export function failRun(run: RunContext, error: unknown): RunResult {
  const { abort, queue } = run;
  const failure = toRunnerError(
    abort.signal.aborted ? abort.signal.reason : error,
  );
  if (queue.length) {
    run.log({ msg: "follow-ups not processed", count: queue.length });
  }
  run.emitter.emit(
    "run.failed",
    failureEventData({
      failure,
      stderrTail: run.transport?.stderrTail(),
      unprocessed: queue,
      secrets: run.secrets,
    }),
  );
  const status = failure.code === "run.cancelled" ? "cancelled" : "failed";
  return { status, code: failure.code, sessionId: run.sessionId };
}
