/**
 * Session choice: resume, load (replay suppressed) or new, by the agent's
 * advertised capabilities and the stored session id.
 *
 * @module
 */

import type { InitializeResponse, McpServer } from "@agentclientprotocol/sdk";
import type { AgentConnection } from "../acp/client.ts";
import type { SessionState } from "../acp/session_state.ts";
import type { RunConfig } from "../config.ts";
import { RunnerError } from "../errors.ts";

/** Options for {@linkcode chooseSession}. */
export interface ChooseSessionOptions {
  /** The initialized connection. */
  connection: AgentConnection;
  /** The agent's `initialize` answer. */
  initialize: InitializeResponse;
  /** The run config (`reuse-session`, `create-session-if-missing`). */
  config: Pick<RunConfig, "reuseSession" | "createSessionIfMissing">;
  /** The stored session id, if any. */
  storedSessionId?: string;
  /**
   * Why the stored session may not be restored (`run/caller_floor.ts`,
   * `restoreRefusal`): a new session replaces it, as when restoring fails.
   */
  notRestored?: string;
  /** The session's working directory. */
  cwd: string;
  /** MCP servers for the session. */
  mcpServers: McpServer[];
  /**
   * Switches replay suppression on before `session/load`; it stays on until
   * the engine sends the prompt (agents replay past their answer).
   */
  setReplaying: (replaying: boolean) => void;
  /** Structured log. */
  log: (entry: Record<string, unknown>) => void;
}

/** The session a run uses and how it got it. */
export interface SessionChoice {
  /** The ACP session id. */
  sessionId: string;
  /** How it was obtained. */
  method: "resume" | "load" | "new";
  /** Why the stored session was not restored, when a new one replaced it. */
  reset?: string;
  /** What the agent's answer advertised (config options, modes, models). */
  state: SessionState;
}

/** Picks and establishes the run's session. */
export async function chooseSession(
  options: ChooseSessionOptions,
): Promise<SessionChoice> {
  const { connection, config, storedSessionId, cwd, mcpServers } = options;
  const caps = options.initialize.agentCapabilities ?? {};
  const canResume = Boolean(caps.sessionCapabilities?.resume);
  const canLoad = Boolean(caps.loadSession);
  let reset: string | undefined;
  if (storedSessionId && config.reuseSession && options.notRestored) {
    if (!config.createSessionIfMissing) {
      throw new RunnerError(
        "acp.session_missing",
        `The stored session cannot be continued: ${options.notRestored}. Set create-session-if-missing=true to start a fresh session, or forget the conversation's session.`,
      );
    }
    reset = options.notRestored;
    options.log({ msg: "stored session not restored; starting a new one" });
  } else if (storedSessionId && config.reuseSession) {
    const params = { sessionId: storedSessionId, cwd, mcpServers };
    let failure: RunnerError | undefined;
    if (canResume || canLoad) {
      try {
        if (canResume) {
          const state = await connection.resumeSession(params);
          return { sessionId: storedSessionId, method: "resume", state };
        }
        options.setReplaying(true);
        const state = await connection.loadSession(params);
        return { sessionId: storedSessionId, method: "load", state };
      } catch (error) {
        if (
          !(error instanceof RunnerError) || error.code !== "acp.session_failed"
        ) {
          throw error;
        }
        failure = error;
      }
    }
    if (!config.createSessionIfMissing) {
      throw new RunnerError(
        "acp.session_missing",
        failure
          ? `The agent could not restore the stored session (${failure.message}). Set create-session-if-missing=true to start a fresh session, or forget the conversation's session.`
          : "The agent supports neither session/resume nor session/load, so the stored session cannot be restored. Set create-session-if-missing=true to start a fresh session.",
      );
    }
    reset = failure?.message ??
      "The agent supports neither session/resume nor session/load.";
    options.log({
      msg: "stored session not restored; starting a new one",
      reason: reset,
    });
  } else if (!config.createSessionIfMissing) {
    throw noSessionToContinue(Boolean(storedSessionId));
  }
  const { sessionId, state } = await connection.newSession({
    cwd,
    mcpServers,
  });
  return { sessionId, method: "new", state, ...(reset ? { reset } : {}) };
}

/** `acp.session_missing` for a run with no stored session it may use. */
function noSessionToContinue(storedButNotReused: boolean): RunnerError {
  return new RunnerError(
    "acp.session_missing",
    storedButNotReused
      ? "reuse-session is false, so the stored session is not used, and create-session-if-missing is false, so no new session may start. Set reuse-session=true to continue the stored session, or create-session-if-missing=true to start a fresh one."
      : "There is no stored session to continue, and create-session-if-missing is false, so no new session may start. Set create-session-if-missing=true to start a fresh session.",
  );
}
