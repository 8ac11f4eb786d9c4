/**
 * Where a run sits in the warm pool, written once for the run manager's
 * local and SSH runs and the daemon's jobs (`setup.ts` places both): a run that reuses sessions takes
 * the warm agent whose whole target matches its own, and leaves its own
 * agent warm when it completes. See `docs/runs.md`, "Warm agents".
 *
 * @module
 */

import type { AgentCommand } from "../agent/launch.ts";
import type { RunConfig } from "../config.ts";
import type { WarmPlace } from "./agent_run.ts";
import type { RunRequest } from "./request.ts";
import {
  effectiveSessionConfig,
  type SessionSettings,
} from "./session_memory.ts";
import type { WarmPool } from "./warm/pool.ts";

/** What makes a run's target, wherever its agent starts. */
export interface WarmTargetParts {
  /** The conversation, where the pool keeps agents per conversation. */
  conversationId?: string;
  /** The run's config. */
  config: RunConfig;
  /** The agent command the run would start. */
  command: AgentCommand;
  /** The ACP session's working directory. */
  sessionCwd: string;
  /** What the conversation remembers of its session's config values. */
  sessionMemory?: SessionSettings;
  /** What the agent is told of MCP servers and assets, as the run's entrance has them. */
  mcp: readonly unknown[];
}

/** Options for {@linkcode warmPlaceFor}. */
interface WarmPlaceOptions extends WarmTargetParts {
  /** The pool, if the runner keeps one. */
  pool: WarmPool | undefined;
  /** The location `GET /v1/agents` shows. */
  location: string;
}

/** The run's place in the pool, or undefined when the pool may not hold its agent. */
function warmPlaceFor(
  options: WarmPlaceOptions,
): WarmPlace | undefined {
  const { pool, config } = options;
  if (!pool?.enabled || !config.reuseSession) return undefined;
  return {
    pool,
    target: warmTarget(options),
    labels: {
      conversation: options.conversationId ?? "",
      provider: config.provider,
      location: options.location,
    },
  };
}

/**
 * What a run's entrance tells the pool beyond the run itself: the runner
 * manager's runs take every default, a daemon's jobs name their own.
 */
export interface WarmEntrance {
  /** The pool, if the runner keeps one. */
  pool: WarmPool | undefined;
  /**
   * What the agent is told of MCP servers and assets, as the entrance has
   * them (default: the config's MCP and assets keys).
   */
  mcp?: readonly unknown[];
  /** The location `GET /v1/agents` shows (default: the config's). */
  location?: string;
  /**
   * Whether a run of no conversation may leave its agent warm (a daemon's
   * job: its hub finds the agent again by the session id it keeps).
   * Otherwise only a conversation's runs have a place.
   */
  withoutConversation?: boolean;
}

/** A run's place in the pool, by its request and its entrance. */
export function warmPlaceOf(
  request: RunRequest,
  command: AgentCommand,
  { entrance, sessionMemory }: {
    entrance: WarmEntrance;
    sessionMemory?: SessionSettings;
  },
): WarmPlace | undefined {
  if (!request.conversationId && !entrance.withoutConversation) {
    return undefined;
  }
  const parts = runTargetParts(request, command, sessionMemory);
  return warmPlaceFor({
    ...parts,
    mcp: entrance.mcp ?? parts.mcp,
    pool: entrance.pool,
    location: entrance.location ?? request.config.location,
  });
}

/** The target of a local or SSH run (see {@linkcode warmTarget}). */
export function targetParts(
  request: RunRequest,
  command: AgentCommand,
  sessionMemory?: SessionSettings,
): Record<string, unknown> {
  return warmTarget(runTargetParts(request, command, sessionMemory));
}

function runTargetParts(
  request: RunRequest,
  command: AgentCommand,
  sessionMemory?: SessionSettings,
): WarmTargetParts {
  const { config } = request;
  return {
    conversationId: request.conversationId,
    config,
    command,
    sessionCwd: config.sessionCwd ?? command.cwd,
    sessionMemory,
    mcp: [
      config.mcpServersJson,
      config.langbotAssetsEnabled,
      config.langbotAssetsMode,
      config.langbotAssetsGatewayHost,
      config.langbotAssetsGatewayPort,
      config.langbotAssetsGatewayPublicUrl,
    ],
  };
}

/**
 * Everything that makes a run's target: the same values mean an agent
 * started for one run is exactly what the other would start. The session
 * config values are the ones the run wants, its own or remembered
 * (`sessionMemory`): one asked for and the same one remembered are the same.
 */
export function warmTarget(parts: WarmTargetParts): Record<string, unknown> {
  const { config, command } = parts;
  const wanted = effectiveSessionConfig(config, parts.sessionMemory).values;
  return {
    conversation: parts.conversationId,
    provider: config.provider,
    location: config.location,
    argv: command.argv,
    cwd: command.cwd,
    env: command.env,
    sessionCwd: parts.sessionCwd,
    ssh: config.location === "remote-ssh"
      ? [
        config.sshTarget,
        config.sshPort,
        config.sshIdentityFile,
        config.sshExtraOptions,
        config.remoteShell,
      ]
      : undefined,
    fs: [config.fsRead, config.fsWrite],
    // Advertised at initialize: a warm agent keeps what it was told.
    terminals: config.clientTerminals,
    session: [
      wanted.model,
      wanted.mode,
      wanted.sessionConfigJson,
      config.authMethod,
    ],
    mcp: parts.mcp,
  };
}
