/**
 * Where a run's agent runs, as the run manager and the daemon's job runner
 * see it. The entry points (`runner serve`, `runner run`, `runner daemon`)
 * choose the locations and hand them in; `lib/locations/` implements them.
 * An agent location (local, remote-ssh) starts the agent and returns its
 * streams, its teardown and the secrets it minted; a relayed location
 * (daemon) runs the whole run elsewhere and returns its handle.
 *
 * @module
 */

import type { AgentCommand } from "../agent/launch.ts";
import type { ReaperRegistry } from "../agent/reaper.ts";
import type { RunEvent } from "../events.ts";
import type { RunHandle } from "./engine.ts";
import type { KeptRunAssets, RunAssetsHook, RunRequest } from "./request.ts";
import type { AgentTransport } from "./types.ts";
import type { SessionSettings } from "./session_memory.ts";

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

/** A location whose agent the runner itself starts (local, remote-ssh). */
export interface AgentLocation {
  /** Checks what must exist before the run is recorded (local: creates the workspace); throws `config.invalid`. */
  prepare(command: AgentCommand): void;
  /** Prepares the run's assets and starts the agent; on failure releases what it made. */
  start(context: AgentStart): Promise<StartedAgent>;
}

/** What a relayed location is handed for one run. */
export interface RelayedRunContext {
  /** The run id. */
  runId: string;
  /** The run request. */
  request: RunRequest;
  /** The session the store holds for the conversation. */
  storedSessionId?: string;
  /** What the conversation remembers of its session's config values (`docs/runs.md`). */
  sessionMemory?: SessionSettings;
  /** Values to redact from the run's events and logs. */
  secrets: readonly string[];
  /** Receives the run's events in order. */
  emit: (event: RunEvent) => void;
  /** Structured log (redacted). */
  log: (entry: Record<string, unknown>) => void;
}

/** A location whose engine runs elsewhere (daemon): it runs the whole run. */
export type RelayedLocation = (context: RelayedRunContext) => RunHandle;

/** The locations an entry point hands the run manager. */
export interface RunLocations {
  /** `location=local`. */
  local: AgentLocation;
  /** `location=remote-ssh`. */
  "remote-ssh"?: AgentLocation;
  /** `location=daemon`, when the runner serves a hub. */
  daemon?: RelayedLocation;
}
