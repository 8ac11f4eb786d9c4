/**
 * The end of a run whose agent the engine drives: stopping its terminals,
 * connection and agent (a failure's `run.failed` is `lifecycle.ts`'s).
 *
 * @module
 */

import { settleWithin } from "../timing.ts";
import type { RunContext } from "./context.ts";

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
