/**
 * A run's set-up, written once for the run manager and the daemon's job
 * runner: the agent command its config makes, its location prepared for
 * that command, the run's redaction list, the conversation's kept session
 * and remembered values held to the caller's floor, the session's cwd and
 * the run's place in the warm pool. The caller's floor is applied to the
 * request before (`runner serve`'s by its routes, a daemon's by
 * `daemon/job_floor.ts`), and what comes out goes to `startAgentRun`. See
 * `docs/architecture.md`.
 *
 * @module
 */

import type { AgentCommand } from "../agent/launch.ts";
import { runAssetsSecrets } from "../assets/request.ts";
import type { RunConfig } from "../config.ts";
import type { UsageCost } from "../events.ts";
import { prepareAgentCommand, type RegistryLaunch } from "../providers.ts";
import type { SessionKey } from "../store/types.ts";
import type { WarmPlace } from "./agent_run.ts";
import { flooredMemory, restoreRefusal } from "./caller_floor.ts";
import type { AgentLocation } from "./location.ts";
import type { RunRequest } from "./request.ts";
import type { SessionSettings } from "./session_memory.ts";
import { type WarmEntrance, warmPlaceOf } from "./targets.ts";

export type { WarmEntrance } from "./targets.ts";

/** The conversation's agent session as the run's entrance keeps it (the store, or the hub). */
export interface KeptSession {
  /** Where the store keeps it (the run manager's conversations). */
  key?: SessionKey;
  /** The agent session to resume, if any. */
  storedSessionId?: string;
  /** What the conversation remembers of its session's config values; undefined: the entrance keeps none. */
  remembered?: SessionSettings;
  /** The conversation's latest run so far (a warm agent must have seen it). */
  previousRunId?: string;
  /** The stored session's running cost as the agent last reported it. */
  cost?: UsageCost;
}

/** Options for {@linkcode setUpRun}. */
export interface RunSetupOptions {
  /** The run request, already held to its caller's floor. */
  request: RunRequest;
  /** The runner's environment, which the agent's is made from. */
  environment: Record<string, string>;
  /** Where the run goes (a local one creates the workspace up front). */
  location: AgentLocation | undefined;
  /** The runner's own secrets to redact (API and daemon tokens). */
  secrets?: readonly string[];
  /** The kept session of the run's conversation, found by the command that names its agent. */
  findSession(command: AgentCommand): Promise<KeptSession>;
  /** What the run's entrance tells the warm pool. */
  warm: WarmEntrance;
  /** Resolves (and installs) a registry agent the config names (`docs/registry.md`); unset: presets and `custom` only. */
  resolveRegistry?(config: RunConfig): Promise<RegistryLaunch | undefined>;
}

/** What a run needs resolved before it starts. */
export interface RunSetup {
  /** The agent's command, environment and directory. */
  command: AgentCommand;
  /** Every value to redact from the run's config, events and logs. */
  secrets: string[];
  /** The kept session as found. */
  session: KeptSession;
  /** The agent session to resume. */
  storedSessionId?: string;
  /** The remembered values the run's caller could still ask for (`{}`: nothing yet). */
  sessionMemory?: SessionSettings;
  /** Why the kept session may not be restored under the caller's floor. */
  sessionNotRestored?: string;
  /** The ACP session's working directory. */
  sessionCwd: string;
  /** The run's place in the warm pool, when the pool may hold its agent. */
  warm?: WarmPlace;
}

/**
 * Sets a run up: its command, its location prepared, its secrets, its kept
 * session within the caller's floor and its warm place.
 *
 * @throws {RunnerError} `config.invalid` for a provider or workspace that
 * cannot work; the command's and the location's own errors.
 */
export async function setUpRun(options: RunSetupOptions): Promise<RunSetup> {
  const { request } = options;
  const { config } = request;
  const registry = await options.resolveRegistry?.(config);
  const command = prepareAgentCommand(config, {
    environment: options.environment,
    registry,
  });
  options.location?.prepare(command);
  const secrets = [
    ...command.secrets,
    ...(options.secrets ?? []),
    ...runAssetsSecrets(request.assets),
  ];
  const session = await options.findSession(command);
  const { storedSessionId, remembered } = session;
  const choices = request.sessionChoices;
  // A value remembered before the operator narrowed the choices is not asked again.
  const sessionMemory = remembered && choices
    ? flooredMemory(choices, remembered).settings
    : remembered;
  return {
    command,
    secrets,
    session,
    storedSessionId,
    sessionMemory,
    sessionNotRestored: storedSessionId && remembered && choices
      ? restoreRefusal(choices, remembered, config)
      : undefined,
    sessionCwd: config.sessionCwd ?? command.cwd,
    warm: warmPlaceOf(request, command, {
      entrance: options.warm,
      sessionMemory,
    }),
  };
}
