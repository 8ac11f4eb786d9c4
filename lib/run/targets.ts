/**
 * Where the run manager's local or SSH run sits in the warm pool: a run of
 * a conversation that reuses sessions takes the conversation's warm agent
 * if one matches its whole target, and leaves its own agent warm when it
 * completes. See `docs/runs.md`, "Warm agents".
 *
 * @module
 */

import type { AgentCommand } from "../agent/launch.ts";
import type { WarmPlace } from "./agent_run.ts";
import type { RunRequest } from "./request.ts";
import {
  effectiveSessionConfig,
  type SessionSettings,
} from "./session_memory.ts";
import type { WarmPool } from "./warm/pool.ts";

/** The run's place in the pool, or undefined when the pool may not hold its agent. */
export function warmPlaceOf(
  request: RunRequest,
  command: AgentCommand,
  { pool, sessionMemory }: {
    pool: WarmPool | undefined;
    sessionMemory?: SessionSettings;
  },
): WarmPlace | undefined {
  const { conversationId, config } = request;
  if (!pool?.enabled || !conversationId || !config.reuseSession) {
    return undefined;
  }
  return {
    pool,
    target: targetParts(request, command, sessionMemory),
    labels: {
      conversation: conversationId,
      provider: config.provider,
      location: config.location,
    },
  };
}

/**
 * Everything that makes a local or SSH run's target: the same values mean an
 * agent started for one run is exactly what the other would start. The
 * session config values are the ones the run wants, its own or remembered
 * (`sessionMemory`): one asked for and the same one remembered are the same.
 */
export function targetParts(
  request: RunRequest,
  command: AgentCommand,
  sessionMemory?: SessionSettings,
): Record<string, unknown> {
  const { config } = request;
  const wanted = effectiveSessionConfig(config, sessionMemory).values;
  return {
    conversation: request.conversationId,
    provider: config.provider,
    location: config.location,
    argv: command.argv,
    cwd: command.cwd,
    env: command.env,
    sessionCwd: config.sessionCwd ?? command.cwd,
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
