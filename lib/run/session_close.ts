/**
 * `session/close` before a run's agent is stopped, where the session will not
 * be used again (`reuse-session=false`) and the agent advertises
 * `sessionCapabilities.close`: the agent frees the session's resources (and
 * may discard it) instead of being killed with it open.
 *
 * @module
 */

import { toRunnerError } from "../errors.ts";
import type { RunContext } from "./context.ts";

/** How long an agent may take to answer `session/close` before teardown goes on. */
const CLOSE_MS = 2000;

/** Closes the run's session when it is not reused and the agent can close it; never throws. */
export async function closeUnusedSession(run: RunContext): Promise<void> {
  const { connection, sessionId } = run;
  if (run.config.reuseSession || !run.canCloseSession) return;
  if (!connection || !sessionId || connection.fatal()) return;
  try {
    await connection.closeSession(sessionId, AbortSignal.timeout(CLOSE_MS));
    run.log({ msg: "session closed", level: "debug" });
  } catch (error) {
    run.log({
      msg: "session/close failed",
      error: toRunnerError(error).message,
    });
  }
}
