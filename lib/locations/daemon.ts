/**
 * `location=daemon` for the run manager: each run becomes one or more hub
 * jobs on the chosen daemon. Steering is done here, on the hub side:
 * follow-ups wait until the current job ends and then run as further jobs on
 * the newest session; the caller sees one run with increasing `sequence`
 * numbers and exactly one terminal event, and a run that fails or is
 * cancelled hands its unprocessed follow-ups back. Also the hub listener `runner
 * serve` starts, and the hook that answers a run's MCP requests. See
 * `docs/daemon.md`.
 *
 * @module
 */

import { join } from "node:path";
import { parseMcpServersJson } from "../assets/mcp_servers_json.ts";
import type { AssetsHook } from "../assets/wiring.ts";
import { buildRunStartPayload } from "../relay/payload.ts";
import { RunnerError, toRunnerError } from "../errors.ts";
import type { RunEvent } from "../events.ts";
import { isTerminalEvent } from "../events.ts";
import {
  createHub,
  type HubLogEntry,
  type HubServer,
  type McpHandler,
  type RelayHub,
  type RelayJobOutcome,
  serveHub,
} from "../hub/relay_hub.ts";
import { buildPrompt, promptText, type RunInput } from "../run/prompt.ts";
import type { Json } from "../relay.ts";
import {
  type RunHandle,
  type RunResult,
  STEERING_QUEUE_LIMIT,
} from "../run/engine.ts";
import type { RemoteRunner } from "../run/manager.ts";
import { checkListenerToken } from "../hub/token_rules.ts";

/** Options of {@linkcode createDaemonLocation}. */
export interface DaemonLocationOptions {
  /** The hub daemons connect to. */
  hub: RelayHub;
  /**
   * The assets layer: each run is attached (its `mcp.request`s are then
   * answered through {@linkcode hubMcpHandlerFor}) and released at its end.
   */
  assets?: Pick<AssetsHook, "attachRun">;
  /** Structured log (never secrets); default: the run manager's run log. */
  log?: (entry: Record<string, unknown>) => void;
}

type Context = Parameters<RemoteRunner>[0];

/** Makes the runner for `location=daemon`. */
export function createDaemonLocation(
  options: DaemonLocationOptions,
): RemoteRunner {
  return (context) => startDaemonRun(options, context);
}

function startDaemonRun(
  options: DaemonLocationOptions,
  context: Context,
): RunHandle {
  const { runId, request } = context;
  const { config } = request;
  const daemonId = config.daemonId ?? "";
  const log = (entry: Record<string, unknown>) =>
    options.log
      ? options.log({ run_id: runId, daemon_id: daemonId, ...entry })
      : context.log({ daemon_id: daemonId, ...entry });
  const queue: RunInput[] = [];
  const stop = new AbortController();
  let cancelReason: RunnerError | undefined;
  let closed = false;
  let terminal: RunEvent | undefined;
  let sequence = 0;
  let sessionId = context.storedSessionId;
  let held: RunEvent | undefined;
  let releaseAssets: (() => void) | undefined;

  function forward(event: RunEvent) {
    if (terminal) return;
    if (isTerminalEvent(event)) {
      closed = true;
      if (event.type === "run.failed" && queue.length) {
        // Follow-ups the run could not answer go back to the caller.
        event = {
          ...event,
          data: {
            ...event.data,
            unprocessed_inputs: queue.map((input) => ({
              text: input.text ?? "",
            })),
          },
        };
        log({ msg: "follow-ups not processed", count: queue.length });
      }
      queue.length = 0;
      terminal = event;
    }
    context.emit({
      ...event,
      run_id: runId,
      sequence: ++sequence,
      timestamp: event.timestamp ?? Date.now(),
    });
  }

  function onEvent(event: RunEvent) {
    if (terminal) return;
    if (
      event.type === "state.updated" &&
      event.data.key === "external.acp_session_id" &&
      typeof event.data.value === "string"
    ) {
      sessionId = event.data.value;
    }
    if (event.type === "run.completed" && queue.length && !cancelReason) {
      held = event; // folded: a follow-up job continues this run
      return;
    }
    forward(event);
  }

  async function runJobs(): Promise<void> {
    const attached = options.assets?.attachRun({ runId, request });
    releaseAssets = attached?.release;
    // The agent's MCP capabilities are unknown on the hub: send every server.
    const transports = { http: true, sse: true };
    const mcpServers = attached
      ? attached.sessionMcpServers(transports)
      : config.mcpServersJson
      ? parseMcpServersJson(config.mcpServersJson, transports)
      : [];
    let input = request.input;
    let followUp = false;
    for (;;) {
      if (cancelReason) throw cancelReason;
      held = undefined;
      let outcome: RelayJobOutcome;
      try {
        ({ outcome } = await options.hub.runJob({
          daemonId,
          runId,
          payload: buildRunStartPayload({
            runId,
            input,
            config,
            storedSessionId: sessionId,
            reuseSession: followUp ? true : undefined,
            mcpServers,
            promptPrefix: followUp ? undefined : attached?.promptPrefix,
          }),
          onEvent,
          signal: stop.signal,
          connectTimeoutMs: config.daemonConnectTimeout * 1000,
        }));
      } catch (error) {
        throw cancelReason ?? error;
      }
      log({ msg: "daemon job ended", outcome, follow_up: followUp });
      if (terminal) return;
      if (outcome === "cancel_timeout") {
        throw new RunnerError(
          "agent_runtime.daemon_disconnected",
          `daemon ${daemonId} did not confirm the cancel in time; the daemon ID is fenced. Check on its machine that no agent process of this run is left, then run \`runner daemons unfence ${daemonId} --yes\`.`,
        );
      }
      if (outcome === "cancelled" || cancelReason) {
        throw cancelReason ?? new RunnerError(
          "runner.shutting_down",
          "The hub is shutting down; the daemon job was cancelled. Retry the run.",
        );
      }
      const next = held ? queue.shift() : undefined;
      if (!next) {
        if (held) forward(held);
        return;
      }
      log({ msg: "steering: next daemon job", queued: queue.length });
      input = followUpInput(next);
      followUp = true;
    }
  }

  const done = runJobs().then(
    () => {
      if (!terminal) {
        throw new RunnerError(
          "relay.protocol_error",
          "the daemon job ended without a terminal event; upgrade hub and daemon together",
        );
      }
    },
  ).catch((error) => {
    const failure = toRunnerError(error);
    forward({
      run_id: runId,
      type: "run.failed",
      data: {
        error: failure.message,
        code: failure.code,
        retryable: failure.retryable,
      },
    });
  }).then((): RunResult => {
    closed = true;
    releaseAssets?.();
    if (terminal?.type === "run.completed") {
      return { status: "completed", sessionId };
    }
    const code = String(terminal?.data.code ?? "runner.internal");
    return {
      status: code === "run.cancelled" ? "cancelled" : "failed",
      code,
      sessionId,
    };
  });

  return {
    runId,
    steer(input) {
      if (closed || !request.conversationId) return "closed";
      if (queue.length >= STEERING_QUEUE_LIMIT) return "full";
      queue.push(input);
      return "queued";
    },
    cancel(reason) {
      if (terminal || cancelReason) return;
      cancelReason = reason ??
        new RunnerError("run.cancelled", "The run was cancelled.");
      closed = true;
      stop.abort();
    },
    done,
  };
}

/**
 * A follow-up job carries text only, like a follow-up turn of the local
 * engine: its attachments are named in a note appended to the text.
 */
function followUpInput(input: RunInput): RunInput {
  try {
    const { blocks } = buildPrompt({
      input,
      capabilities: undefined,
      followUp: true,
    });
    return { text: promptText(blocks) };
  } catch {
    return { text: input.text ?? "" }; // buildPrompt refuses an empty input
  }
}

/** Answers one run's MCP messages (e.g. the run's `AssetBackend`). */
export interface RunMcpBackend {
  /** Answers a JSON-RPC message or batch; `null` when nothing needs an answer. */
  handle(message: unknown): Promise<unknown | null>;
}

/**
 * The hub's `mcpHandler`: answers from `backendFor(runId)` (e.g.
 * `(id) => assets.backendForRun(id)`) and, for runs without one, like the
 * hub's default ("no assets for this run", `null` for notifications).
 */
export function hubMcpHandlerFor(
  backendFor: (runId: string) => RunMcpBackend | undefined,
): McpHandler {
  return (job, payload) => {
    const backend = backendFor(job.runId);
    return backend
      ? backend.handle(payload)
      : Promise.resolve(noAssetsAnswer(payload));
  };
}

function noAssetsAnswer(payload: Json): Json {
  const answer = (message: Json): Json => {
    if (
      typeof message !== "object" || message === null || Array.isArray(message)
    ) {
      return rpcError(null, -32600, "Invalid Request");
    }
    if (!("method" in message) || !("id" in message)) return null;
    return rpcError(message.id, -32000, "no assets for this run");
  };
  if (!Array.isArray(payload)) return answer(payload);
  const answers = payload.map(answer).filter((item) => item !== null);
  return answers.length ? answers : null;
}

function rpcError(id: Json, code: number, message: string): Json {
  return { jsonrpc: "2.0", id, error: { code, message } };
}

/** Options of {@linkcode startHubListener}. */
export interface HubListenerOptions {
  /** Listen address (default 127.0.0.1). */
  host?: string;
  /** Listen port (the plugin's default is 8766; 0 = any free port). */
  port: number;
  /** The shared daemon token (required off loopback, checked by the token rules). */
  token?: string;
  /** The data directory; fences live in `<dataDir>/relay`. */
  dataDir: string;
  /** Answers `mcp.request` (default: "no assets for this run"). */
  mcpHandler?: McpHandler;
  /** Receives the hub's log records. */
  onLog?: (entry: HubLogEntry) => void;
}

/** A running hub with its WebSocket listener. */
export interface HubListener {
  /** The hub (for `createDaemonLocation`, `listDaemons`, `unfence`). */
  hub: RelayHub;
  /** The listener (`url`, `port`). */
  server: HubServer;
  /** Cancels jobs (waiting for acknowledgements), closes sockets, stops listening. */
  close(): Promise<void>;
}

/** The hub's state directory under a data directory. */
export function hubStateDir(dataDir: string): string {
  return join(dataDir, "relay");
}

/** Checks the token, creates the hub on `<dataDir>/relay` and listens. */
export function startHubListener(options: HubListenerOptions): HubListener {
  const host = options.host ?? "127.0.0.1";
  checkListenerToken({
    token: options.token,
    host,
    purpose: "--daemon-token",
  });
  const hub = createHub({
    token: options.token,
    stateDir: hubStateDir(options.dataDir),
    mcpHandler: options.mcpHandler,
    onLog: options.onLog,
  });
  const server = serveHub({ hub, hostname: host, port: options.port });
  return {
    hub,
    server,
    async close() {
      await hub.close();
      await server.close();
    },
  };
}

/** The `GET /v1/daemons` body: connected and fenced daemons, snake_case. */
export function describeDaemons(hub: RelayHub): {
  daemons: Record<string, unknown>[];
} {
  return {
    daemons: hub.listDaemons().map((daemon) => ({
      daemon_id: daemon.daemonId,
      connected: daemon.connected,
      fenced: daemon.fenced,
      metadata: daemon.metadata,
      connected_at: daemon.connectedAt ?? null,
      last_seen_at: daemon.lastSeenAt ?? null,
      active_jobs: daemon.activeJobs,
    })),
  };
}
