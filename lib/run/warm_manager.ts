/**
 * The run manager's launch of a local or SSH run, with the warm pool when
 * the run may use it: a run of a conversation that reuses sessions takes the
 * conversation's warm agent if one matches its whole target, and leaves its
 * own agent warm when it completes. See `docs/runs.md`, "Warm agents".
 *
 * @module
 */

import type { AgentLaunch } from "../agent/launch.ts";
import {
  type AgentLaunchOptions,
  createAgentLaunch,
} from "../locations/launch.ts";
import type { KeptRunAssets, RunRequest } from "./request.ts";
import type { AgentTransport, WarmSlot } from "./types.ts";
import type { AgentCompanion, WarmPool } from "./warm_pool.ts";
import { createWarmLaunch, warmTargetKey } from "./warm_slot.ts";

/** Options for {@linkcode launchLocalOrSsh}. */
export interface LocalOrSshLaunchOptions extends AgentLaunchOptions {
  /** The warm pool, when the runner keeps one. */
  pool?: WarmPool;
  /** The conversation's stored session. */
  storedSessionId?: string;
  /** The conversation's latest run before this one, in the store. */
  previousRunId?: string;
  /** Structured log. */
  log: (entry: Record<string, unknown>) => void;
}

/** The engine's launch and warm slot of one run, and what to release at its end. */
export interface LocalOrSshLaunch {
  /** The engine's `launch`. */
  launch(signal: AbortSignal): Promise<AgentTransport>;
  /** The engine's `warm`, when the pool may hold the run's agent. */
  warm?: WarmSlot;
  /** Releases the run's assets (call when the run has ended). */
  release(): void;
}

/** Prepares a local or remote-ssh run's launch, warm when it can be. */
export function launchLocalOrSsh(
  options: LocalOrSshLaunchOptions,
): LocalOrSshLaunch {
  const { pool, request, runId } = options;
  const { conversationId, config } = request;
  const warmable = Boolean(
    pool?.enabled && conversationId && config.reuseSession,
  );
  const prepared = createAgentLaunch({ ...options, keepable: warmable });
  if (!warmable) return prepared;
  const warm = createWarmLaunch({
    pool: pool!,
    target: warmTargetKey(targetParts(request, options.launch)),
    labels: {
      conversation: conversationId!,
      provider: config.provider,
      location: config.location,
    },
    storedSessionId: options.storedSessionId,
    history: { runId, previousRunId: options.previousRunId },
    launch: prepared.launch,
    adopt(companion) {
      if (!isKeptAssets(companion)) return { release() {} };
      const held = companion.attach({ runId, request });
      options.secrets.push(...held.secrets);
      return held;
    },
    keepCompanion: () => prepared.keepAssets(),
    log: options.log,
  });
  return {
    launch: warm.launch,
    warm: warm.slot,
    release() {
      prepared.release();
      warm.release();
    },
  };
}

function isKeptAssets(
  companion: AgentCompanion | undefined,
): companion is KeptRunAssets {
  return companion !== undefined && "attach" in companion;
}

/**
 * Everything that makes a local or SSH run's target: the same values mean an
 * agent started for one run is exactly what the other would start.
 */
export function targetParts(
  request: RunRequest,
  launch: AgentLaunch,
): Record<string, unknown> {
  const { config } = request;
  return {
    conversation: request.conversationId,
    provider: config.provider,
    location: config.location,
    argv: launch.argv,
    cwd: launch.cwd,
    env: launch.env,
    sessionCwd: config.sessionCwd ?? launch.cwd,
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
