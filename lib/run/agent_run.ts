/**
 * One run, written once for the run manager and the daemon's job runner,
 * wherever its agent runs. Where the location starts the agent (local,
 * remote-ssh), the location's agent (or the conversation's warm agent) is
 * acquired for the engine, the engine runs, and what the run held is
 * released at its end; where it runs each turn elsewhere (daemon), the run's
 * turns go there (`relayed_run.ts`). Both share one life (`lifecycle.ts`).
 * The secrets the location or a warm agent's companion minted are returned
 * by them and added to the run's redaction list here, the only place that
 * extends it. See `docs/architecture.md`.
 *
 * @module
 */

import type { McpServer } from "@agentclientprotocol/sdk";
import type { AgentCommand } from "../agent/launch.ts";
import type { ReaperRegistry } from "../agent/reaper.ts";
import type { EventSink } from "../events.ts";
import { type RunHandle, startRun } from "./engine.ts";
import { startRelayedRun } from "./relayed_run.ts";
import type { AgentLocation, StartedAgent } from "./location.ts";
import type { KeptRunAssets, RunAssetsHook, RunRequest } from "./request.ts";
import type { AgentTransport } from "./types.ts";
import type { SessionSettings } from "./session_memory.ts";
import type { AgentCompanion, WarmPool } from "./warm/pool.ts";
import { createWarmHold, warmTargetKey } from "./warm/slot.ts";

/** Where a run's agent may come from the warm pool, and goes back to it. */
export interface WarmPlace {
  /** The pool. */
  pool: WarmPool;
  /** Everything that makes the run's target (see `warmTargetKey`). */
  target: Record<string, unknown>;
  /** Shown by `GET /v1/agents`. */
  labels: { conversation: string; provider: string; location: string };
}

/** Options for {@linkcode startAgentRun}. */
export interface AgentRunOptions {
  /** The run id. */
  runId: string;
  /** The run request. */
  request: RunRequest;
  /** The agent command and environment. */
  command: AgentCommand;
  /** Where the agent starts. */
  location: AgentLocation;
  /** Assets wiring, if any. */
  assets?: RunAssetsHook;
  /** Records agent groups for the reaper. */
  registry?: ReaperRegistry;
  /** The run's redaction list; this function alone adds the minted secrets to it. */
  secrets: string[];
  /** The session the store holds for the conversation. */
  storedSessionId?: string;
  /** Why that session may not be restored: a new one replaces it (`session.reset`). */
  sessionNotRestored?: string;
  /** What the conversation remembers of its session's config values (`docs/runs.md`). */
  sessionMemory?: SessionSettings;
  /** The ACP session's working directory. */
  sessionCwd: string;
  /** MCP servers given to the session besides the location's. */
  mcpServers?: McpServer[];
  /** The warm pool's place for the run, when the pool may hold its agent. */
  warm?: WarmPlace;
  /**
   * This run and the conversation's latest run before it in the store, when
   * known: a warm agent whose session took another run's turn last is not
   * taken (it missed turns taken on another replica).
   */
  history?: { runId: string; previousRunId?: string };
  /** Receives the run's events in order. */
  emit: EventSink;
  /** Structured log. */
  log: (entry: Record<string, unknown>) => void;
  /** Why nobody can answer the run's permission requests, if so. */
  permissionAskUnavailable?: string;
}

/** A started run and what its caller may ask of its agent. */
export interface AgentRun {
  /** The engine's handle; `done` resolves once what the run held is released. */
  handle: RunHandle;
  /** The cold start's agent, once the engine asked for it. */
  launched(): Promise<AgentTransport> | undefined;
  /** Whether the run's agent went to the warm pool (then it is not torn down). */
  kept(): boolean;
}

/**
 * Starts a run: acquires its agent (warm or cold), runs the engine, releases
 * at the end; or, at a location that runs each turn elsewhere, runs its turns
 * there.
 *
 * @example One run of a local ACP agent, below the run manager (no store)
 * ```ts
 * import assert from "node:assert/strict";
 * import { parseRunConfig } from "../config.ts";
 * import type { RunEvent } from "../events.ts";
 * import { createLocalLocation } from "../locations/local.ts";
 * import { prepareAgentCommand } from "../providers.ts";
 * import { startAgentRun } from "./agent_run.ts";
 *
 * const workspace = await Deno.makeTempDir();
 * try {
 *   // The repository's fixture agent speaks ACP; any ACP agent's command fits.
 *   const root = new URL("../../", import.meta.url).pathname;
 *   const config = parseRunConfig({
 *     provider: "custom",
 *     "acp-command":
 *       `'${Deno.execPath()}' run -A --config '${root}deno.json' '${root}tests/fixtures/agent.ts'`,
 *     workspace,
 *   });
 *   const command = prepareAgentCommand(config);
 *   const location = createLocalLocation();
 *   location.prepare(command);
 *   const events: RunEvent[] = [];
 *   const run = startAgentRun({
 *     runId: crypto.randomUUID(),
 *     request: { input: { text: "hello" }, config },
 *     command,
 *     location,
 *     secrets: [],
 *     sessionCwd: workspace,
 *     emit: (event) => events.push(event),
 *     log: () => {},
 *   });
 *   assert.equal((await run.handle.done).status, "completed");
 *   // Exactly one terminal event, the last one.
 *   assert.deepEqual(
 *     events.filter((event) => event.type.startsWith("run.")).map((e) => e.type),
 *     ["run.started", "run.completed"],
 *   );
 * } finally {
 *   await Deno.remove(workspace, { recursive: true });
 * }
 * ```
 */
export function startAgentRun(options: AgentRunOptions): AgentRun {
  const { location } = options;
  if (location.runTurn) {
    const runTurn = location.runTurn.bind(location);
    return {
      handle: startRelayedRun({
        ...options,
        location: { runTurn },
        // The daemon is asked for a new session instead.
        storedSessionId: options.sessionNotRestored
          ? undefined
          : options.storedSessionId,
      }),
      launched: () => undefined,
      kept: () => false,
    };
  }
  return startEngineRun(options);
}

/** A run whose agent the location starts and the engine drives. */
function startEngineRun(options: AgentRunOptions): AgentRun {
  const { runId, request, secrets, log } = options;
  let started: StartedAgent | undefined;
  let ended = false;
  let launched: Promise<AgentTransport> | undefined;
  const coldLaunch = (signal: AbortSignal) => {
    const start = options.location.start;
    if (!start) throw new Error("the location starts no agent");
    launched = start.call(options.location, {
      runId,
      request,
      command: options.command,
      assets: options.assets,
      keepable: options.warm !== undefined,
      registry: options.registry,
      signal,
    }).then((agent) => {
      started = agent;
      secrets.push(...agent.secrets);
      if (ended) agent.release();
      return agent.transport;
    });
    return launched;
  };
  const hold = options.warm &&
    createWarmHold({
      pool: options.warm.pool,
      target: warmTargetKey(options.warm.target),
      labels: options.warm.labels,
      // A session that may not be restored is not taken warm either.
      storedSessionId: options.sessionNotRestored
        ? undefined
        : options.storedSessionId,
      history: options.history,
      launch: coldLaunch,
      adopt(companion) {
        if (!isKeptAssets(companion)) return { release() {} };
        const held = companion.attach({ runId, request });
        secrets.push(...held.secrets);
        return held;
      },
      keepCompanion: () => started?.keepAssets(),
      log,
    });
  const handle = startRun({
    runId,
    conversationId: request.conversationId,
    input: request.input,
    config: request.config,
    storedSessionId: options.storedSessionId,
    sessionNotRestored: options.sessionNotRestored,
    sessionMemory: options.sessionMemory,
    sessionCwd: options.sessionCwd,
    mcpServers: options.mcpServers,
    secrets,
    emit: options.emit,
    log,
    launch: hold?.launch ?? coldLaunch,
    warm: hold?.slot,
    permissionAskUnavailable: options.permissionAskUnavailable,
    onSessionUpdate: request.onSessionUpdate,
    terminals: {
      env: options.command.env,
      sandbox: options.command.sandbox,
      registry: options.registry,
    },
  });
  const done = handle.done.finally(() => {
    ended = true;
    started?.release();
    hold?.release();
  });
  return {
    handle: { ...handle, done },
    launched: () => launched,
    kept: () => hold?.kept ?? false,
  };
}

function isKeptAssets(
  companion: AgentCompanion | undefined,
): companion is KeptRunAssets {
  return companion !== undefined && "attach" in companion;
}
