/**
 * Wires the LangBot assets MCP surface into runs: per run, the request's
 * `assets` field and the config's `langbot-assets-*` keys become an
 * ephemeral bridge or a gateway registration, the agent's `mcpServers`
 * entries (plus `mcp-servers-json`), and the optional run-scope note. The
 * per-run backend is also offered to the daemon hub. See `docs/assets.md`.
 *
 * @module
 */

import { selfCommand } from "./stdio_bridge.ts";
import type { McpCapabilities, McpServer } from "@agentclientprotocol/sdk";
import type { RunAssetsSpec } from "./grant.ts";
import { type AssetBackend, createAssetBackend } from "./mcp/server.ts";
import { parseMcpServersJson } from "./mcp_servers_json.ts";
import { runScopeNote } from "./run_scope.ts";
import { parseRunAssetsRequest, type RunAssetsRequest } from "./request.ts";
import { buildRunAssetsSpec } from "./run_spec.ts";
import {
  closeEndpointPool,
  createEndpointPool,
  type EndpointPool,
  type GatewayDefaults,
  type ServedEndpoint,
  serveRunEndpoint,
} from "./run_endpoint.ts";
import type { RunConfig } from "../config.ts";
import type {
  KeptRunAssets,
  RunAssetsHook,
  RunRequest,
} from "../run/request.ts";
import { createWarmBackend, type WarmBackend } from "./warm_endpoint.ts";

export type { GatewayDefaults } from "./run_endpoint.ts";

/** Options for {@linkcode createAssetsHook}. */
export interface AssetsHookOptions {
  /** Gateway settings for runs whose config does not set them. */
  gatewayDefaults?: GatewayDefaults;
  /** Deadline of one call forwarded to an upstream or callback (default 60 s). */
  sourceTimeoutMs?: number;
  /** Structured log; never receives tokens or upstream credentials. */
  log: (entry: Record<string, unknown>) => void;
}

/** What {@linkcode RunAssetsHook.prepare} hands the run manager. */
export type PreparedRunAssets = Awaited<ReturnType<RunAssetsHook["prepare"]>>;

/** A run whose agent reaches its assets through another path (the daemon relay). */
export interface AttachedRunAssets {
  /** The run-scope note for the first prompt, when `append-run-scope-prompt`. */
  promptPrefix?: string;
  /** The user's `mcp-servers-json` servers, by the agent's capabilities. */
  sessionMcpServers: (capabilities: McpCapabilities) => McpServer[];
  /** Ends the run's backend ({@linkcode AssetsHook.backendForRun} forgets it). */
  release(): void;
}

/** The assets hook for the run manager, plus what serve and the hub need. */
export interface AssetsHook extends RunAssetsHook {
  /** The backend of an active run (prepared or attached), for `mcp.request`. */
  backendForRun(runId: string): AssetBackend | undefined;
  /**
   * Registers a run whose MCP traffic arrives elsewhere (a daemon run: its
   * proxy forwards to the hub, which answers from {@linkcode backendForRun}).
   * Throws `config.invalid` for a bad `assets` field.
   */
  attachRun(context: { runId: string; request: RunRequest }): AttachedRunAssets;
  /** Ends every run's bridge or token and stops the gateways. */
  close(): Promise<void>;
}

interface ActiveRun {
  spec: RunAssetsSpec;
  backend?: AssetBackend;
}

/** What the hook keeps across runs. */
interface HookState {
  /** Structured log; never receives tokens or upstream credentials. */
  log: (entry: Record<string, unknown>) => void;
  /** Deadline of one call forwarded to an upstream or callback. */
  sourceTimeoutMs?: number;
  /** Runs with assets, prepared or attached, by run id. */
  active: Map<string, ActiveRun>;
  /** The release of every run not yet released. */
  releases: Set<() => void>;
  /** The runs' bridges and the shared gateways. */
  endpoints: EndpointPool;
}

/** A run of the hook, as the run manager names it. */
type RunContext = { runId: string; request: RunRequest };

/** Makes the hook that gives every run its LangBot assets MCP server. */
export function createAssetsHook(options: AssetsHookOptions): AssetsHook {
  const { log, sourceTimeoutMs } = options;
  const state: HookState = {
    log,
    sourceTimeoutMs,
    active: new Map(),
    releases: new Set(),
    endpoints: createEndpointPool({
      defaults: options.gatewayDefaults ?? {},
      sourceTimeoutMs,
      log,
    }),
  };
  return {
    prepare: (context) => prepareRun(state, context),
    attachRun: (context) => attachRun(state, context),
    backendForRun: (runId) => backendForRun(state, runId),
    close: () => closeHook(state),
  };
}

async function prepareRun(
  state: HookState,
  context: RunContext & { keepable?: boolean },
): Promise<PreparedRunAssets> {
  const { runId, request } = context;
  const { config } = request;
  const assets = parseRunAssetsRequest(request.assets);
  const userServers = userServersOf(config);
  if (!config.langbotAssetsEnabled) {
    return {
      mcpServers: [],
      sessionMcpServers: userServers,
      secrets: [],
      release: () => {},
    };
  }
  const run = registerRun(state, { ...context, assets });
  // A run whose agent may stay warm gets an endpoint that can outlive it.
  const warm = context.keepable
    ? createWarmBackend({
      gateway: config.langbotAssetsMode === "gateway",
      sourceTimeoutMs: state.sourceTimeoutMs,
    })
    : undefined;
  warm?.hold(run.spec, config.langbotAssetsTokenTtl * 1000);
  let served: ServedEndpoint;
  try {
    served = await serveRunEndpoint(state.endpoints, {
      runId,
      spec: run.spec,
      config,
      backend: warm?.backend,
    });
  } catch (error) {
    state.active.delete(runId);
    throw error;
  }
  state.log({
    msg: "assets ready",
    run_id: runId,
    mode: config.langbotAssetsMode === "gateway" ? "gateway" : "ephemeral",
    url: served.entry.url,
  });
  // ACP lets a client send an http server only to an agent advertising
  // mcpCapabilities.http, so the entry is chosen once those are known. Over
  // an ssh tunnel the static list is what the location forwards with
  // `ssh -R`; the location offers it only to agents with MCP over HTTP.
  const reach = reachOf(config);
  let kept = false;
  return {
    mcpServers: reach === "tunnel" ? [served.entry] : [],
    sessionMcpServers: (capabilities) =>
      sessionServersWithAssets(state, {
        runId,
        served,
        reach,
        user: userServers(capabilities),
        capabilities,
      }),
    promptPrefix: config.appendRunScopePrompt
      ? runScopeNote(run.spec, runId)
      : undefined,
    secrets: [served.token],
    endpointUrls: reach === "local" ? [served.entry.url] : [],
    release: releaseOnce(state, () => {
      if (state.active.get(runId) === run) state.active.delete(runId);
      if (kept) warm?.letGo(runId);
      else served.stop();
    }),
    keep: warm && (() => {
      kept = true;
      return keptEndpoint(state, { warm, served });
    }),
  };
}

/** A warm agent's endpoint, handed from run to run until the agent is gone. */
function keptEndpoint(
  state: HookState,
  endpoint: { warm: WarmBackend; served: ServedEndpoint },
): KeptRunAssets {
  const { warm, served } = endpoint;
  return {
    attach(context) {
      const { runId, request } = context;
      const { config } = request;
      const assets = parseRunAssetsRequest(request.assets);
      const run = registerRun(state, { ...context, assets });
      warm.hold(run.spec, config.langbotAssetsTokenTtl * 1000);
      state.log({ msg: "assets handed to the next run", run_id: runId });
      return {
        promptPrefix: config.appendRunScopePrompt
          ? runScopeNote(run.spec, runId)
          : undefined,
        secrets: [served.token],
        release: releaseOnce(state, () => {
          if (state.active.get(runId) === run) state.active.delete(runId);
          warm.letGo(runId);
        }),
      };
    },
    stop: releaseOnce(state, () => served.stop()),
  };
}

/**
 * How the agent reaches the run's endpoint: on this machine, from a remote
 * machine through the location's `ssh -R` tunnel, or from a remote machine
 * over plain HTTP (`mcp-bridge-transport=http`, the public URL).
 */
type Reach = "local" | "tunnel" | "remote";

function reachOf(config: RunConfig): Reach {
  if (config.location !== "remote-ssh") return "local";
  return config.mcpBridgeTransport === "http" ? "remote" : "tunnel";
}

/** The servers a prepared run's session gets once the agent's capabilities are known. */
function sessionServersWithAssets(
  state: HookState,
  session: {
    runId: string;
    served: ServedEndpoint;
    reach: Reach;
    user: McpServer[];
    capabilities: McpCapabilities;
  },
): McpServer[] {
  const { runId, served, reach, user, capabilities } = session;
  if (capabilities.http === true) {
    return reach === "tunnel" ? user : [served.entry, ...user];
  }
  if (reach !== "local") {
    state.log({
      msg: "assets not injected: the agent does not advertise MCP over HTTP",
      run_id: runId,
    });
    return user;
  }
  // Every agent speaks stdio MCP: bridge to the same endpoint through
  // `runner mcp-stdio`, with URL and token in its environment.
  state.log({ msg: "assets offered over the stdio bridge", run_id: runId });
  return [stdioBridgeEntry(served.entry, served.token), ...user];
}

function attachRun(
  state: HookState,
  context: RunContext,
): AttachedRunAssets {
  const { runId, request } = context;
  const { config } = request;
  const assets = parseRunAssetsRequest(request.assets);
  const sessionMcpServers = userServersOf(config);
  if (!config.langbotAssetsEnabled) {
    return { sessionMcpServers, release: () => {} };
  }
  const run = registerRun(state, { ...context, assets });
  return {
    sessionMcpServers,
    promptPrefix: config.appendRunScopePrompt
      ? runScopeNote(run.spec, runId)
      : undefined,
    release: releaseOnce(state, () => {
      if (state.active.get(runId) === run) state.active.delete(runId);
    }),
  };
}

function backendForRun(
  state: HookState,
  runId: string,
): AssetBackend | undefined {
  const run = state.active.get(runId);
  if (!run) return undefined;
  run.backend ??= createAssetBackend(run.spec, {
    sourceTimeoutMs: state.sourceTimeoutMs,
  });
  return run.backend;
}

async function closeHook(state: HookState): Promise<void> {
  for (const release of [...state.releases]) release();
  await closeEndpointPool(state.endpoints);
}

/** The user's `mcp-servers-json` servers, by the agent's capabilities. */
function userServersOf(
  config: RunConfig,
): (capabilities: McpCapabilities) => McpServer[] {
  const text = config.mcpServersJson ?? "";
  // Syntax and stdio entries are checked before the agent starts; http/sse
  // entries again once the agent's mcpCapabilities are known.
  parseMcpServersJson(text, { http: true, sse: true });
  return (capabilities: McpCapabilities) =>
    parseMcpServersJson(text, {
      http: capabilities.http === true,
      sse: capabilities.sse === true,
    });
}

function registerRun(
  state: HookState,
  context: RunContext & { assets: RunAssetsRequest | undefined },
): ActiveRun {
  const { runId, request, assets } = context;
  const spec = buildRunAssetsSpec({
    runId,
    conversationId: request.conversationId,
    assets,
    input: request.input,
    knowledgeBases: request.config.knowledgeBases,
  });
  const run: ActiveRun = { spec };
  state.active.set(runId, run);
  return run;
}

/** Wraps `work` to run at most once, and at the latest when the hook closes. */
function releaseOnce(state: HookState, work: () => void): () => void {
  let done = false;
  const release = () => {
    if (done) return;
    done = true;
    state.releases.delete(release);
    work();
  };
  state.releases.add(release);
  return release;
}

/** A stdio MCP server entry that runs `runner mcp-stdio` against `entry`'s URL. */
function stdioBridgeEntry(entry: McpServer, token: string): McpServer {
  const [command, ...args] = selfCommand();
  return {
    name: entry.name,
    command,
    args: [...args, "mcp-stdio"],
    env: [
      { name: "RUNNER_MCP_URL", value: "url" in entry ? entry.url : "" },
      { name: "RUNNER_MCP_TOKEN", value: token },
    ],
  };
}
