/**
 * `session/close` for a warm agent leaving the pool for good (evicted,
 * deleted, a deleted conversation, shutdown), where the agent advertised
 * `sessionCapabilities.close`: a short-lived ACP connection over the agent's
 * shared streams, bounded in time, before the agent is stopped.
 *
 * @module
 */

import type { SharedAgent } from "./transport.ts";

/** How long an idle agent may take to answer `session/close`. */
const CLOSE_MS = 2000;

/** Sends `session/close` for `sessionId` over `agent`'s streams; never throws. */
export async function closeIdleSession(
  agent: SharedAgent,
  sessionId: string,
  log: (entry: Record<string, unknown>) => void,
): Promise<void> {
  if (agent.gone || agent.unusable) return;
  const view = agent.lend({ quietUntilFirstWrite: true });
  const { connectAgent } = await import("../../acp/client.ts");
  const conn = connectAgent({
    stdin: view.stdin,
    stdout: view.stdout,
    maxMessageBytes: 1024 * 1024,
    onUpdate: () => {},
    onPermission: () => Promise.resolve({ outcome: { outcome: "cancelled" } }),
  });
  try {
    await conn.closeSession(sessionId, AbortSignal.timeout(CLOSE_MS));
    log({ msg: "warm agent's session closed", level: "debug" });
  } catch (error) {
    log({ msg: "session/close failed", error: String(error) });
  } finally {
    conn.close();
    agent.detach();
  }
}
