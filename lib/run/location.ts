/**
 * Where a run's agent runs, as the run manager and the daemon's job runner
 * see it: one interface for every location. The entry points (`runner
 * serve`, `runner run`, `runner daemon`) choose the locations and hand them
 * in; `lib/locations/` implements them. Every run has the same life
 * (`lifecycle.ts`, started by `agent_run.ts`); a location only says how the
 * agent is reached. Local and remote-ssh start the agent and return its
 * streams, its teardown and the secrets they minted, and the engine here
 * drives it over ACP; a daemon runs each turn of the run as a job on its
 * machine and streams the turn's events back.
 *
 * @module
 */

import type { AgentCommand } from "../agent/launch.ts";
import type { ReaperRegistry } from "../agent/reaper.ts";
import type { RunEvent } from "../events.ts";
import type { PermissionAnswer } from "./permission_desk.ts";
import type { RunInput } from "./prompt.ts";
import type { KeptRunAssets, RunAssetsHook, RunRequest } from "./request.ts";
import type { AgentTransport } from "./types.ts";
import type { SessionSettings } from "./session_memory.ts";

export type { PermissionAnswer } from "./permission_desk.ts";
export type { RunInput } from "./prompt.ts";
export type { RunRequest } from "./request.ts";

/** What an agent location is asked to start. */
export interface AgentStart {
  /** The run id. */
  runId: string;
  /** The run request. */
  request: RunRequest;
  /** The agent command and environment. */
  command: AgentCommand;
  /** Prepares the run's assets, if any. */
  assets?: RunAssetsHook;
  /** The agent may stay warm after the run: its assets endpoint must be able to outlive it. */
  keepable?: boolean;
  /** Records agent groups for the reaper. */
  registry?: ReaperRegistry;
  /** Aborts the start (cancel, startup timeout). */
  signal: AbortSignal;
}

/** An agent a location started, with what the run must redact and release. */
export interface StartedAgent {
  /** The agent's streams and teardown. */
  transport: AgentTransport;
  /** Values minted for this run (run tokens) to redact from its events and logs. */
  secrets: readonly string[];
  /** Releases the run's assets (idempotent). */
  release(): void;
  /** Keeps the run's assets endpoint with its warm agent (only when `keepable`). */
  keepAssets(): KeptRunAssets | undefined;
}

/**
 * Where a run's agent runs. A location has exactly one of `start` (the
 * agent's streams come here: local, remote-ssh) and `runTurn` (each turn
 * runs where the agent's own engine is: daemon).
 *
 * @example A location that runs each turn elsewhere (here: in this process, echoing the prompt)
 * ```ts
 * import assert from "node:assert/strict";
 * import { parseRunConfig } from "../config.ts";
 * import type { RunEvent } from "../events.ts";
 * import { prepareAgentCommand } from "../providers.ts";
 * import { startAgentRun } from "./agent_run.ts";
 * import type { AgentLocation } from "./location.ts";
 *
 * const echoing: AgentLocation = {
 *   prepare() {},
 *   runTurn(turn) {
 *     // A daemon sends the turn to its machine as a hub job and streams back
 *     // what the agent there says; the terminal event ends the turn.
 *     const text = `echo: ${turn.input.text}`;
 *     const message = { role: "assistant", content: text };
 *     const run_id = turn.runId;
 *     turn.emit({ run_id, type: "message.completed", data: { message } });
 *     turn.emit({ run_id, type: "run.completed", data: {} });
 *     return Promise.resolve();
 *   },
 * };
 *
 * const config = parseRunConfig({
 *   provider: "custom",
 *   "acp-command": "my-agent", // never started: the turns run elsewhere
 *   workspace: Deno.cwd(),
 * });
 * const events: RunEvent[] = [];
 * const run = startAgentRun({
 *   runId: crypto.randomUUID(),
 *   request: { input: { text: "hello" }, config },
 *   command: prepareAgentCommand(config),
 *   location: echoing,
 *   secrets: [],
 *   sessionCwd: Deno.cwd(),
 *   emit: (event) => events.push(event),
 *   log: () => {},
 * });
 * assert.equal((await run.handle.done).status, "completed");
 * assert.deepEqual(events.map((event) => event.type), [
 *   "message.completed",
 *   "run.completed",
 * ]);
 * ```
 */
export interface AgentLocation {
  /** Checks what must exist before the run is recorded (local: creates the workspace); throws `config.invalid`. */
  prepare(command: AgentCommand): void;
  /** Prepares the run's assets and starts the agent; on failure releases what it made. */
  start?(context: AgentStart): Promise<StartedAgent>;
  /**
   * Runs one turn of the run where the agent is and streams its events to
   * `turn.emit`, its terminal event included; resolves once the turn is
   * over there, and throws why when it ended without a terminal event.
   */
  runTurn?(turn: RelayedTurn): Promise<void>;
}

/** One turn of a run that a location runs elsewhere (`AgentLocation.runTurn`). */
export interface RelayedTurn {
  /** The run id. */
  runId: string;
  /** The run request (its config and assets). */
  request: RunRequest;
  /** The turn's input: the run's own, or a follow-up (text only). */
  input: RunInput;
  /** Whether the turn continues the run's session (a follow-up). */
  followUp: boolean;
  /** The newest agent session of the conversation. */
  sessionId?: string;
  /** What the conversation remembers of its session's config values (`docs/runs.md`). */
  sessionMemory?: SessionSettings;
  /** Receives the turn's events (as run events: completions whole), in order. */
  emit: (event: RunEvent) => void;
  /**
   * Says why `permission-decision=ask` cannot be carried for this turn
   * (the run says it once, then the fallback applies).
   */
  askUnavailable(reason: string): void;
  /** Hands the run the way to send answers to this turn's permission requests. */
  answers(send: (requestId: string, answer: PermissionAnswer) => boolean): void;
  /** Aborted when the run is cancelled or times out: the turn is cancelled there. */
  signal: AbortSignal;
  /** Structured log (redacted). */
  log: (entry: Record<string, unknown>) => void;
}

/** The locations an entry point hands the run manager. */
export interface RunLocations {
  /** `location=local`. */
  local: AgentLocation;
  /** `location=remote-ssh`. */
  "remote-ssh"?: AgentLocation;
  /** `location=daemon`, when the runner serves a hub. */
  daemon?: AgentLocation;
}
