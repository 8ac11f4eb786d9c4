/**
 * One turn of a `location=daemon` run: a hub job on the daemon the run's
 * config names, its events streamed back as run events. The run around the
 * turns (follow-ups, the timeout, cancel, the terminal event) is
 * `run/relayed_run.ts`'s. See `docs/daemon.md`.
 *
 * @module
 */

import type { McpServer } from "@agentclientprotocol/sdk";
import { parseMcpServersJson } from "../assets/mcp_servers_json.ts";
import type { AssetsHook, AttachedRunAssets } from "../assets/wiring.ts";
import { buildRunStartPayload } from "../relay/payload.ts";
import { fromRelayEvent } from "../relay/wire_events.ts";
import { RunnerError } from "../errors.ts";
import { createEventRestorer, isTerminalEvent } from "../events.ts";
import type { RelayHub, RelayJobOutcome } from "../hub/relay_hub.ts";
import type { RelayedTurn } from "../run/location.ts";
import {
  type JsonObject,
  PERMISSION_ASK_CAPABILITY,
  SESSION_UPDATE_CAPABILITY,
} from "../relay.ts";

/** Options of `createDaemonLocation` (`./daemon.ts`). */
export interface DaemonLocationOptions {
  /** The hub daemons connect to. */
  hub: RelayHub;
  /**
   * The assets layer: each turn is attached (its `mcp.request`s are then
   * answered through `hubMcpHandlerFor`) and released at its end.
   */
  assets?: Pick<AssetsHook, "attachRun">;
  /** Structured log (never secrets); default: the run manager's run log. */
  log?: (entry: Record<string, unknown>) => void;
}

/**
 * Runs one turn as a hub job; resolves once the daemon ended it, and throws
 * why when it ended without a terminal event (a cancelled turn just ends).
 */
export async function runDaemonTurn(
  options: DaemonLocationOptions,
  turn: RelayedTurn,
): Promise<void> {
  const { runId, request } = turn;
  const daemonId = request.config.daemonId ?? "";
  const log = (entry: Record<string, unknown>) =>
    options.log
      ? options.log({ run_id: runId, daemon_id: daemonId, ...entry })
      : turn.log({ daemon_id: daemonId, ...entry });
  const attached = options.assets?.attachRun({ runId, request });
  try {
    const outcome = await runJob(options.hub, {
      turn,
      daemonId,
      attached,
    });
    log({ msg: "daemon job ended", outcome, follow_up: turn.followUp });
    if (turn.signal.aborted) return;
    throwUnlessEnded(daemonId, outcome.outcome, outcome.sawTerminal);
  } finally {
    attached?.release();
  }
}

/** Runs the hub job of `turn`: its `run.start`, events and answers. */
async function runJob(
  hub: RelayHub,
  { turn, daemonId, attached }: {
    turn: RelayedTurn;
    daemonId: string;
    attached?: AttachedRunAssets;
  },
): Promise<{ outcome: RelayJobOutcome; sawTerminal: boolean }> {
  const { runId, request: { config } } = turn;
  const mcpServers = hubMcpServers(turn, attached);
  // Puts back a completion's whole text where the wire left it out (daemon.py
  // sends `run.completed` without `message`) or cut it to fit a frame, and
  // drops `all_content`: the form the run's callers get.
  const complete = createEventRestorer({ allContent: false });
  let sawTerminal = false;
  const { outcome } = await hub.runJob({
    daemonId,
    runId,
    payload: (capabilities) =>
      buildRunStartPayload({
        runId,
        input: turn.input,
        config,
        storedSessionId: turn.sessionId,
        sessionMemory: turn.sessionMemory as
          | Record<string, unknown>
          | undefined,
        reuseSession: turn.followUp ? true : undefined,
        mcpServers,
        promptPrefix: turn.followUp ? undefined : attached?.promptPrefix,
        askAllowed: askAllowed(turn, daemonId, capabilities),
        // Only a caller that takes live updates (`/acp`) costs the frames.
        sessionUpdates: Boolean(turn.request.onSessionUpdate) &&
          capabilities.includes(SESSION_UPDATE_CAPABILITY),
      }),
    onStarted: (started) =>
      turn.answers((requestId, answer) =>
        started.answerPermission(requestId, answer as unknown as JsonObject)
      ),
    onEvent: (wireEvent, runner) => {
      const event = complete(fromRelayEvent(wireEvent, runner));
      if (isTerminalEvent(event)) sawTerminal = true;
      turn.emit(event);
    },
    onUpdate: (update) => turn.request.onSessionUpdate?.(update),
    signal: turn.signal,
    connectTimeoutMs: config.daemonConnectTimeout * 1000,
  });
  return { outcome, sawTerminal };
}

function hubMcpServers(
  turn: RelayedTurn,
  attached: AttachedRunAssets | undefined,
): McpServer[] {
  const { config } = turn.request;
  // The agent's MCP capabilities are unknown on the hub: send every server.
  const transports = { http: true, sse: true };
  return attached
    ? attached.sessionMcpServers(transports)
    : config.mcpServersJson
    ? parseMcpServersJson(config.mcpServersJson, transports)
    : [];
}

/** Throws when a job that was not cancelled ended without a terminal event. */
function throwUnlessEnded(
  daemonId: string,
  outcome: RelayJobOutcome,
  sawTerminal: boolean,
): void {
  if (outcome === "cancel_timeout") {
    throw new RunnerError(
      "agent_runtime.daemon_disconnected",
      `daemon ${daemonId} did not confirm the cancel in time; the daemon ID is fenced. Check on its machine that no agent process of this run is left, then run \`runner daemons unfence ${daemonId} --yes\`.`,
    );
  }
  if (outcome === "cancelled") {
    throw new RunnerError(
      "runner.shutting_down",
      "The hub is shutting down; the daemon job was cancelled. Retry the run.",
    );
  }
  if (!sawTerminal) {
    throw new RunnerError(
      "relay.protocol_error",
      "the daemon job ended without a terminal event; upgrade hub and daemon together",
    );
  }
}

/**
 * Whether this job may ask a person: the daemon confirmed `permission.ask`.
 * When `ask` was wanted but the daemon cannot carry it, the run says so
 * (once, in a `permission.unavailable` event) and the daemon gets the
 * fallback.
 */
function askAllowed(
  turn: RelayedTurn,
  daemonId: string,
  capabilities: readonly string[],
): boolean {
  const { config, permissionAskUnavailable } = turn.request;
  if (config.permissionDecision !== "ask" || permissionAskUnavailable) {
    return false;
  }
  if (capabilities.includes(PERMISSION_ASK_CAPABILITY)) return true;
  turn.askUnavailable(
    `daemon ${daemonId} cannot ask a person (no permission.ask capability, e.g. LangBot's daemon.py)`,
  );
  return false;
}
