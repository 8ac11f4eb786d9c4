/**
 * What the run engine is given and what it reports: the agent transport a
 * location supplies, the options of one run, and how a run ended.
 * `engine.ts` re-exports these; the engine's steps share them from here.
 *
 * @module
 */

import type {
  McpCapabilities,
  McpServer,
  PromptCapabilities,
} from "@agentclientprotocol/sdk";
import type { SessionState } from "../acp/session_state.ts";
import type { ReaperRegistry } from "../agent/reaper.ts";
import type { SandboxPlan } from "../agent/sandbox.ts";
import type { RunConfig } from "../config.ts";
import type { EventSink } from "../events.ts";
import type { RunInput } from "./prompt.ts";
import type { SessionSettings } from "./session_memory.ts";

/** What a location hands the engine: the agent's byte streams and a teardown. */
export interface AgentTransport {
  /** The agent's stdin. */
  stdin: WritableStream<Uint8Array>;
  /** The agent's stdout. */
  stdout: ReadableStream<Uint8Array>;
  /** Resolves when the agent (or its carrier, e.g. ssh) exits. */
  exited: Promise<unknown>;
  /** The redacted stderr tail. */
  stderrTail(): string;
  /** Stops the agent and waits until its process group is gone. */
  teardown(): Promise<void>;
  /**
   * A confined agent with a private network (`sandbox-network=full`): gives
   * it its network, letting through the host's loopback `ports` only, and
   * lets it start (`docs/sandbox.md`).
   */
  openNetwork?(ports: readonly number[]): Promise<void>;
  /** MCP servers the location contributes (e.g. the daemon's proxy). */
  mcpServers?: McpServer[];
  /** More servers, chosen by the agent's `mcpCapabilities` (may throw `config.invalid`). */
  sessionMcpServers?: (capabilities: McpCapabilities) => McpServer[];
  /** Text the location prepends to the first prompt (the run-scope note). */
  promptPrefix?: string;
}

/** Everything the engine needs for one run. */
export interface RunEngineOptions {
  /** The run id. */
  runId: string;
  /** The conversation, when the run has one (enables steering). */
  conversationId?: string;
  /** The first input. */
  input: RunInput;
  /** The validated config. */
  config: RunConfig;
  /** The session id stored for this conversation, if any. */
  storedSessionId?: string;
  /** Why the stored session may not be restored: a new one replaces it (`session.reset`). */
  sessionNotRestored?: string;
  /**
   * The session config values the conversation remembers (`{}`: none yet);
   * undefined when nothing is remembered for this run (no conversation, or a
   * hub that keeps none). See `session_memory.ts`.
   */
  sessionMemory?: SessionSettings;
  /** The ACP session's working directory. */
  sessionCwd: string;
  /** Starts the agent (the location). */
  launch: (signal: AbortSignal) => Promise<AgentTransport>;
  /** Receives the run's events in order. */
  emit: EventSink;
  /** MCP servers given to the session (sent again on load/resume). */
  mcpServers?: McpServer[];
  /** Text prepended to the first prompt (the run-scope note). */
  promptPrefix?: string;
  /** Values redacted from anything the engine reports. */
  secrets?: readonly string[];
  /** Structured log lines (never secrets). */
  log?: (entry: Record<string, unknown>) => void;
  /**
   * Why nobody can answer a permission request here (n8n, a hub or daemon
   * without `permission.ask`): `ask` then means `permission-fallback`, said
   * once in a `permission.unavailable` event.
   */
  permissionAskUnavailable?: string;
  /** Receives each live `session/update`, secrets redacted (`RunRequest.onSessionUpdate`). */
  onSessionUpdate?: (update: Record<string, unknown>) => void;
  /** The conversation's warm agent, and where this run's agent goes when it completes. */
  warm?: WarmSlot;
  /**
   * What client terminals start commands with (`client-terminals`); without
   * it the `terminal` capability is not advertised.
   */
  terminals?: TerminalLaunch;
}

/** How a run's client terminals start commands on this machine. */
export interface TerminalLaunch {
  /** The agent's allow-listed environment; `terminal/create` may add to it. */
  env: Record<string, string>;
  /** The agent's confinement: a confined agent's commands run under the same plan. */
  sandbox?: SandboxPlan;
  /** Records each command's process group for the reaper. */
  registry?: ReaperRegistry;
}

/** An agent kept alive from an earlier run, ready for `session/prompt`. */
export interface WarmAgent {
  /** This run's view of the agent (its teardown stops the agent for good). */
  transport: AgentTransport;
  /** The session the agent holds open. */
  sessionId: string;
  /** What prompt content the agent accepts. */
  promptCapabilities?: PromptCapabilities;
  /** The session's choices and values in force when it was kept. */
  sessionState?: SessionState;
  /** Whether the agent advertised `sessionCapabilities.close`. */
  canCloseSession?: boolean;
}

/** A run's place in the warm pool (`docs/runs.md`, "Warm agents"). */
export interface WarmSlot {
  /** Takes the conversation's warm agent; undefined means start one. */
  take(): Promise<WarmAgent | undefined>;
  /** Offers the agent of a completed run; true when it was kept (no teardown). */
  keep(
    state: {
      sessionId: string;
      promptCapabilities?: PromptCapabilities;
      sessionState?: SessionState;
      canCloseSession?: boolean;
    },
  ): boolean;
}

/** How a run ended. */
export interface RunResult {
  /** Final status. */
  status: "completed" | "failed" | "cancelled";
  /** The failure code, when failed or cancelled. */
  code?: string;
  /** The ACP session used, when one was established. */
  sessionId?: string;
}
