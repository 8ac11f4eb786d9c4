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
import {
  type AssetGateway,
  type AssetsMcpServer,
  startAssetGateway,
  startEphemeralBridge,
} from "./bridge.ts";
import type { RunAssetsSpec } from "./grant.ts";
import { type AssetBackend, createAssetBackend } from "./mcp_server.ts";
import { parseMcpServersJson } from "./mcp_servers_json.ts";
import { runScopeNote } from "./run_scope.ts";
import { parseRunAssetsRequest, type RunAssetsRequest } from "./request.ts";
import { buildRunAssetsSpec } from "./run_spec.ts";
import type { RunConfig } from "../config.ts";
import { RunnerError } from "../errors.ts";
import type { RunAssetsHook, RunRequest } from "../run/manager.ts";

/** Gateway settings used when a run's config leaves them unset. */
export interface GatewayDefaults {
  /** The gateway port (`langbot-assets-gateway-port`); default random. */
  port?: number;
  /** The URL given to agents (`langbot-assets-gateway-public-url`). */
  publicUrl?: string;
}

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

/** The longest delay `setTimeout` honours (about 24.8 days). */
const MAX_TIMER_MS = 2 ** 31 - 1;

function listenFailed(what: string, error: unknown): RunnerError {
  const reason = error instanceof Error ? error.message : String(error);
  return new RunnerError(
    "assets.listen_failed",
    `The LangBot assets ${what} could not listen (${reason}). Choose a free ` +
      "langbot-assets-gateway-port or another host, or set langbot-assets-enabled=false.",
    { cause: error },
  );
}

function publicUrlOf(config: RunConfig, defaults: GatewayDefaults) {
  const url = config.langbotAssetsGatewayPublicUrl ?? defaults.publicUrl;
  if (url === undefined) return undefined;
  let protocol = "";
  try {
    protocol = new URL(url).protocol;
  } catch { /* reported below */ }
  if (protocol !== "http:" && protocol !== "https:") {
    throw new RunnerError(
      "config.invalid",
      "langbot-assets-gateway-public-url: must be an http:// or https:// URL (the gateway's /mcp endpoint as agents reach it).",
      { detail: { key: "langbot-assets-gateway-public-url" } },
    );
  }
  return url;
}

/** Makes the hook that gives every run its LangBot assets MCP server. */
export function createAssetsHook(options: AssetsHookOptions): AssetsHook {
  const { log } = options;
  const defaults = options.gatewayDefaults ?? {};
  const sourceTimeoutMs = options.sourceTimeoutMs;
  const active = new Map<string, ActiveRun>();
  const gateways = new Map<string, Promise<AssetGateway>>();
  const releases = new Set<() => void>();
  const closing = new Set<Promise<void>>();

  function track(closed: Promise<void>) {
    const settled = closed.catch(() => {});
    closing.add(settled);
    settled.finally(() => closing.delete(settled));
  }

  function gatewayFor(hostname: string, port: number): Promise<AssetGateway> {
    const key = `${hostname}:${port}`;
    let gateway = gateways.get(key);
    if (!gateway) {
      // Tokens get no registry TTL: each run's own TTL is enforced by a timer.
      gateway = Promise.resolve()
        .then(() =>
          startAssetGateway({
            hostname,
            port,
            ttlMs: Infinity,
            sourceTimeoutMs,
          })
        )
        .catch((error) => {
          gateways.delete(key);
          throw listenFailed(`gateway on ${key}`, error);
        });
      gateways.set(key, gateway);
      gateway.then(
        (started) => log({ msg: "assets gateway started", url: started.url }),
        () => {},
      );
    }
    return gateway;
  }

  function userServers(config: RunConfig) {
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

  function register(
    runId: string,
    request: RunRequest,
    assets: RunAssetsRequest | undefined,
  ): ActiveRun {
    const spec = buildRunAssetsSpec({
      runId,
      conversationId: request.conversationId,
      assets,
      input: request.input,
      knowledgeBases: request.config.knowledgeBases,
    });
    const run: ActiveRun = { spec };
    active.set(runId, run);
    return run;
  }

  function once(work: () => void): () => void {
    let done = false;
    const release = () => {
      if (done) return;
      done = true;
      releases.delete(release);
      work();
    };
    releases.add(release);
    return release;
  }

  async function serveRun(
    runId: string,
    run: ActiveRun,
    config: RunConfig,
  ): Promise<{ entry: AssetsMcpServer; token: string; stop(): void }> {
    const ttlMs = config.langbotAssetsTokenTtl * 1000;
    if (config.langbotAssetsTokenTtl < config.timeout) {
      log({
        msg: "langbot-assets-token-ttl is shorter than the run timeout; " +
          "the agent loses asset access when the token expires",
        run_id: runId,
        ttl: config.langbotAssetsTokenTtl,
        timeout: config.timeout,
      });
    }
    if (config.langbotAssetsMode !== "gateway") {
      let bridge;
      try {
        bridge = await startEphemeralBridge(run.spec, {
          sourceTimeoutMs,
          ttlMs,
        });
      } catch (error) {
        throw listenFailed("bridge", error);
      }
      return {
        entry: bridge.mcpServer,
        token: bridge.token,
        stop: () => track(bridge.close()),
      };
    }
    const publicUrl = publicUrlOf(config, defaults);
    const port = config.langbotAssetsGatewayPort ?? defaults.port ?? 0;
    const gateway = await gatewayFor(config.langbotAssetsGatewayHost, port);
    const registration = gateway.register(run.spec);
    const expiry = setTimeout(
      () => registration.revoke(),
      Math.min(ttlMs, MAX_TIMER_MS),
    );
    Deno.unrefTimer(expiry);
    return {
      entry: { ...registration.mcpServer, url: publicUrl ?? gateway.url },
      token: registration.token,
      stop() {
        clearTimeout(expiry);
        registration.revoke();
      },
    };
  }

  async function prepare(
    context: { runId: string; request: RunRequest },
  ): Promise<PreparedRunAssets> {
    const { runId, request } = context;
    const { config } = request;
    const assets = parseRunAssetsRequest(request.assets);
    const sessionServers = userServers(config);
    if (!config.langbotAssetsEnabled) {
      return {
        mcpServers: [],
        sessionMcpServers: sessionServers,
        secrets: [],
        release: () => {},
      };
    }
    const run = register(runId, request, assets);
    let served;
    try {
      served = await serveRun(runId, run, config);
    } catch (error) {
      active.delete(runId);
      throw error;
    }
    log({
      msg: "assets ready",
      run_id: runId,
      mode: config.langbotAssetsMode === "gateway" ? "gateway" : "ephemeral",
      url: served.entry.url,
    });
    // ACP lets a client send an http server only to an agent advertising
    // mcpCapabilities.http, so the entry is chosen once those are known. Over
    // ssh the static list is what the location forwards with `ssh -R`; the
    // location offers it only to agents with MCP over HTTP.
    const overSsh = config.location === "remote-ssh";
    return {
      mcpServers: overSsh ? [served.entry] : [],
      sessionMcpServers(capabilities) {
        const user = sessionServers(capabilities);
        if (capabilities.http === true) {
          return overSsh ? user : [served.entry, ...user];
        }
        if (overSsh) {
          log({
            msg:
              "assets not injected: the agent does not advertise MCP over HTTP",
            run_id: runId,
          });
          return user;
        }
        // Every agent speaks stdio MCP: bridge to the same endpoint through
        // `runner mcp-stdio`, with URL and token in its environment.
        log({ msg: "assets offered over the stdio bridge", run_id: runId });
        return [stdioBridgeEntry(served.entry, served.token), ...user];
      },
      promptPrefix: config.appendRunScopePrompt
        ? runScopeNote(run.spec, runId)
        : undefined,
      secrets: [served.token],
      release: once(() => {
        if (active.get(runId) === run) active.delete(runId);
        served.stop();
      }),
    };
  }

  return {
    prepare,
    attachRun({ runId, request }) {
      const { config } = request;
      const assets = parseRunAssetsRequest(request.assets);
      const sessionMcpServers = userServers(config);
      if (!config.langbotAssetsEnabled) {
        return { sessionMcpServers, release: () => {} };
      }
      const run = register(runId, request, assets);
      return {
        sessionMcpServers,
        promptPrefix: config.appendRunScopePrompt
          ? runScopeNote(run.spec, runId)
          : undefined,
        release: once(() => {
          if (active.get(runId) === run) active.delete(runId);
        }),
      };
    },
    backendForRun(runId) {
      const run = active.get(runId);
      if (!run) return undefined;
      run.backend ??= createAssetBackend(run.spec, { sourceTimeoutMs });
      return run.backend;
    },
    async close() {
      for (const release of [...releases]) release();
      const started = await Promise.allSettled([...gateways.values()]);
      gateways.clear();
      for (const result of started) {
        if (result.status === "fulfilled") track(result.value.close());
      }
      await Promise.all([...closing]);
    },
  };
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
