/**
 * `location=daemon` for the run manager: each turn of a run is one hub job
 * on the chosen daemon (`daemon_turn.ts`), its events streamed back; the run
 * around the turns is the same as every location's (`run/relayed_run.ts`
 * on `run/lifecycle.ts`). Also the hub listener `runner serve` starts, and
 * the hook that answers a run's MCP requests. See `docs/daemon.md`.
 *
 * @module
 */

import { join } from "node:path";
import { type DaemonLocationOptions, runDaemonTurn } from "./daemon_turn.ts";
import {
  createHub,
  type HubLogEntry,
  type HubServer,
  type McpHandler,
  type RelayHub,
  serveHub,
} from "../hub/relay_hub.ts";
import type { Logger } from "../log.ts";
import type { Json } from "../relay.ts";
import type { AgentLocation } from "../run/location.ts";
import { checkListenerToken, isLoopbackHost } from "../hub/token_rules.ts";
import { RunnerError } from "../errors.ts";
import type { WebSocketListenerLimits } from "../hub/ws_listener.ts";

export type { DaemonLocationOptions } from "./daemon_turn.ts";

/** Makes `location=daemon`: each turn of a run runs as a hub job. */
export function createDaemonLocation(
  options: DaemonLocationOptions,
): AgentLocation {
  return {
    // The agent's machine checks its own workspace when the job arrives.
    prepare() {},
    runTurn: (turn) => runDaemonTurn(options, turn),
  };
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
  /** The shared daemon token (required unless `tokens` are given; checked by the token rules). */
  token?: string;
  /** Per-daemon tokens by daemon ID (each checked by the token rules). */
  tokens?: Record<string, string>;
  /**
   * On loopback, listen with no token at all: any local process may connect
   * as any daemon ID (`--daemon-loopback-without-token`). Off loopback a
   * token is required whatever this says.
   */
  loopbackWithoutToken?: boolean;
  /** Jobs one daemon ID may run at once. */
  maxJobsPerDaemon?: number;
  /** Daemons the hub keeps at once, connected plus fenced (default 128). */
  maxDaemons?: number;
  /** Connection limits of the listener. */
  limits?: Partial<WebSocketListenerLimits>;
  /** The data directory; fences live in `<dataDir>/relay`. */
  dataDir: string;
  /** Answers `mcp.request` (default: "no assets for this run"). */
  mcpHandler?: McpHandler;
  /** Receives the hub's log records. */
  onLog?: (entry: HubLogEntry) => void;
  /** Where the listener's connection cap and accept failures are logged. */
  log?: Logger;
  /** Called after a daemon connects or disconnects. */
  onChange?: () => void;
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
  const tokens = options.tokens ?? {};
  const tokenless = !options.token && !Object.keys(tokens).length;
  if (tokenless && isLoopbackHost(host) && !options.loopbackWithoutToken) {
    throw new RunnerError(
      "config.invalid",
      `The daemon hub on ${host} needs a daemon token on loopback too: any process on this machine could otherwise connect as a daemon and take its jobs. ` +
        "Pass --daemon-token (runner serve keeps one in its data dir when none is given), or --daemon-loopback-without-token to accept that risk.",
      { detail: { key: "--daemon-token" } },
    );
  }
  if (options.token || tokenless) {
    checkListenerToken({
      token: options.token,
      host,
      purpose: "--daemon-token",
    });
  }
  for (const [daemonId, token] of Object.entries(tokens)) {
    checkListenerToken({
      token,
      host,
      purpose: `the --daemon-tokens-file token of ${JSON.stringify(daemonId)}`,
    });
  }
  const hub = createHub({
    token: options.token,
    tokens,
    withoutToken: tokenless,
    maxJobsPerDaemon: options.maxJobsPerDaemon,
    maxDaemons: options.maxDaemons,
    stateDir: hubStateDir(options.dataDir),
    mcpHandler: options.mcpHandler,
    onLog: options.onLog,
    onChange: options.onChange,
  });
  const server = serveHub({
    hub,
    hostname: host,
    port: options.port,
    limits: options.limits,
    log: options.log,
  });
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
