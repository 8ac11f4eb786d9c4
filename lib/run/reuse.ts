/**
 * The engine's side of warm agents (`docs/runs.md`, "Warm agents"): a run
 * either adopts the conversation's warm agent — no spawn, no `initialize`,
 * no session call, only `session/prompt` — or starts one; `run.started` says
 * which. A run that completed hands its agent back instead of tearing it
 * down; every other ending tears it down as before.
 *
 * @module
 */

import type { AgentConnection } from "../acp/client.ts";
import type { RunContext } from "./context.ts";
import { connectTransport, loadAcpClient, startAgent } from "./startup.ts";
import { closeUnusedSession } from "./session_close.ts";
import { configureRunSession } from "./session_config.ts";
import { shutdown } from "./teardown.ts";

/** Adopts the run's warm agent, or starts one; emits `run.started {agent, sandbox}`. */
export async function startOrAdoptAgent(
  run: RunContext,
): Promise<AgentConnection> {
  run.realRoot ??= realPathHere(run.options.sessionCwd);
  const warm = await run.options.warm?.take();
  if (!warm) {
    run.emitter.emit("run.started", {
      agent: "cold",
      sandbox: run.config.sandbox,
    });
    return await startAgent(run);
  }
  // From here on the run's teardown owns the agent, whatever happens next.
  run.transport = warm.transport;
  if (run.abort.signal.aborted) throw run.abort.signal.reason;
  run.emitter.emit("run.started", {
    agent: "warm",
    sandbox: run.config.sandbox,
  });
  const conn = connectTransport(run, {
    transport: warm.transport,
    client: await loadAcpClient(),
  });
  run.connection = conn;
  run.sessionId = warm.sessionId;
  run.promptCapabilities = warm.promptCapabilities;
  run.canCloseSession = warm.canCloseSession;
  // Only what differs from the values in force costs a call.
  await configureRunSession(run, {
    connection: conn,
    state: warm.sessionState ?? {},
  });
  return conn;
}

/** `path`'s real path, or undefined where it is not on this machine. */
function realPathHere(path: string): string | undefined {
  try {
    return Deno.realPathSync(path);
  } catch {
    return undefined;
  }
}

/** Ends a completed run's use of its agent: kept warm when it may be, else torn down. */
export async function finishAgent(run: RunContext): Promise<void> {
  // A warm agent keeps its process, never the run's commands.
  await run.terminals?.closeAll();
  if (keepWarm(run)) return;
  await closeUnusedSession(run);
  await shutdown(run);
}

/** Hands the agent to the pool; false when it must be torn down instead. */
function keepWarm(run: RunContext): boolean {
  const slot = run.options.warm;
  const { sessionId, connection } = run;
  if (!slot || !sessionId || run.abort.signal.aborted) return false;
  if (run.lateTeardown || connection?.fatal()) return false;
  clearTimeout(run.runTimer);
  connection?.close();
  return slot.keep({
    sessionId,
    promptCapabilities: run.promptCapabilities,
    sessionState: run.sessionState,
    canCloseSession: run.canCloseSession,
  });
}
