/**
 * Serves one run's assets MCP endpoint: an ephemeral bridge of its own, or a
 * registration on a gateway shared by every run with the same host and port.
 * Either way the run token stops working when the run's token TTL is up.
 *
 * @module
 */

import {
  type AssetGateway,
  type AssetsMcpServer,
  startAssetGateway,
  startEphemeralBridge,
  startSharedBridge,
} from "./bridge.ts";
import type { RunAssetsSpec } from "./grant.ts";
import type { AssetBackend } from "./mcp/server.ts";
import type { RunConfig } from "../config.ts";
import { RunnerError } from "../errors.ts";

/** Gateway settings used when a run's config leaves them unset. */
export interface GatewayDefaults {
  /** The gateway port (`langbot-assets-gateway-port`); default random. */
  port?: number;
  /** The URL given to agents (`langbot-assets-gateway-public-url`). */
  publicUrl?: string;
}

/** The gateways, shared bridges and closing bridges the runs of one assets hook share. */
export interface EndpointPool {
  /** Gateway settings for runs whose config does not set them. */
  defaults: GatewayDefaults;
  /** Deadline of one call forwarded to an upstream or callback. */
  sourceTimeoutMs?: number;
  /** Structured log; never receives tokens or upstream credentials. */
  log: (entry: Record<string, unknown>) => void;
  /** Started or starting gateways by `host:port`, shared bridges by `bridge host:port`. */
  gateways: Map<string, Promise<AssetGateway>>;
  /** Bridges and gateways still closing. */
  closing: Set<Promise<void>>;
}

/** A run's endpoint as served. */
export interface ServedEndpoint {
  /** The MCP server entry that reaches the endpoint over HTTP. */
  entry: AssetsMcpServer;
  /** The run token the endpoint accepts. */
  token: string;
  /** Ends the run's access: closes its bridge or revokes its token. */
  stop(): void;
}

/** The longest delay `setTimeout` honours (about 24.8 days). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** Creates an empty pool. */
export function createEndpointPool(
  options: Pick<EndpointPool, "defaults" | "sourceTimeoutMs" | "log">,
): EndpointPool {
  return { ...options, gateways: new Map(), closing: new Set() };
}

/**
 * Serves a run's endpoint as its config says (`langbot-assets-mode`).
 * Throws `assets.listen_failed`, or `config.invalid` for a bad public URL.
 */
export async function serveRunEndpoint(
  pool: EndpointPool,
  run: {
    runId: string;
    spec: RunAssetsSpec;
    config: RunConfig;
    /**
     * A warm agent's backend: the endpoint then lives until `stop()`, and
     * each run's hold on it expires by itself (`./warm_endpoint.ts`).
     */
    backend?: AssetBackend;
  },
): Promise<ServedEndpoint> {
  const { runId, spec, config, backend } = run;
  const ttlMs = backend ? Infinity : config.langbotAssetsTokenTtl * 1000;
  if (config.langbotAssetsTokenTtl < config.timeout) {
    pool.log({
      msg: "langbot-assets-token-ttl is shorter than the run timeout; " +
        "the agent loses asset access when the token expires",
      run_id: runId,
      ttl: config.langbotAssetsTokenTtl,
      timeout: config.timeout,
    });
  }
  if (config.mcpBridgeTransport === "http") {
    return await serveOverHttpTransport(pool, { spec, ttlMs, config, backend });
  }
  if (config.langbotAssetsMode !== "gateway") {
    return await serveOverBridge(pool, { spec, ttlMs, backend });
  }
  return await serveOverGateway(pool, { spec, ttlMs, config, backend });
}

/** Stops every gateway and waits for everything still closing. */
export async function closeEndpointPool(pool: EndpointPool): Promise<void> {
  const started = await Promise.allSettled([...pool.gateways.values()]);
  pool.gateways.clear();
  for (const result of started) {
    if (result.status === "fulfilled") trackClosing(pool, result.value.close());
  }
  await Promise.all([...pool.closing]);
}

function trackClosing(pool: EndpointPool, closed: Promise<void>) {
  const settled = closed.catch(() => {});
  pool.closing.add(settled);
  settled.finally(() => pool.closing.delete(settled));
}

async function serveOverBridge(
  pool: EndpointPool,
  run: { spec: RunAssetsSpec; ttlMs: number; backend?: AssetBackend },
): Promise<ServedEndpoint> {
  let bridge;
  try {
    bridge = await startEphemeralBridge(run.spec, {
      sourceTimeoutMs: pool.sourceTimeoutMs,
      ttlMs: run.ttlMs,
      backend: run.backend,
    });
  } catch (error) {
    throw listenFailed("bridge", error);
  }
  return {
    entry: bridge.mcpServer,
    token: bridge.token,
    stop: () => trackClosing(pool, bridge.close()),
  };
}

/** A run whose endpoint is a registration on a shared listener. */
interface SharedRun {
  spec: RunAssetsSpec;
  ttlMs: number;
  config: RunConfig;
  /** A warm agent's backend, whose grant follows the current run. */
  backend?: AssetBackend;
}

async function serveOverGateway(
  pool: EndpointPool,
  run: SharedRun,
): Promise<ServedEndpoint> {
  const { config } = run;
  const publicUrl = publicUrlOf(config, pool.defaults);
  const gateway = await listenerFor(pool, gatewayAddress(pool, config));
  return registerOn(gateway, run, publicUrl ?? gateway.url);
}

/**
 * `mcp-bridge-transport=http`: the run registers on the gateway or on the
 * shared bridge at `mcp-bridge-host`/`mcp-bridge-port`, and the agent is
 * given `mcp-public-url` (the token travels in a header, never in the URL).
 */
async function serveOverHttpTransport(
  pool: EndpointPool,
  run: SharedRun,
): Promise<ServedEndpoint> {
  const { config } = run;
  const listener = await listenerFor(
    pool,
    config.langbotAssetsMode === "gateway" ? gatewayAddress(pool, config) : {
      kind: "bridge",
      hostname: config.mcpBridgeHost,
      port: config.mcpBridgePort ?? 0,
    },
  );
  return registerOn(listener, run, config.mcpPublicUrl ?? listener.url);
}

function gatewayAddress(pool: EndpointPool, config: RunConfig): Address {
  return {
    kind: "gateway",
    hostname: config.langbotAssetsGatewayHost,
    port: config.langbotAssetsGatewayPort ?? pool.defaults.port ?? 0,
  };
}

function registerOn(
  listener: AssetGateway,
  run: SharedRun,
  url: string,
): ServedEndpoint {
  const registration = listener.register(run.spec, run.backend);
  // A warm agent's registration (no TTL) lives until stop().
  const expiry = run.ttlMs === Infinity ? undefined : setTimeout(
    () => registration.revoke(),
    Math.min(run.ttlMs, MAX_TIMER_MS),
  );
  if (expiry !== undefined) Deno.unrefTimer(expiry);
  return {
    entry: { ...registration.mcpServer, url },
    token: registration.token,
    stop() {
      clearTimeout(expiry);
      registration.revoke();
    },
  };
}

/** Where a shared listener binds, and which kind it is. */
interface Address {
  kind: "gateway" | "bridge";
  hostname: string;
  port: number;
}

function listenerFor(
  pool: EndpointPool,
  address: Address,
): Promise<AssetGateway> {
  const { kind, hostname, port } = address;
  const where = `${hostname}:${port}`;
  const key = kind === "gateway" ? where : `${kind} ${where}`;
  let listener = pool.gateways.get(key);
  if (!listener) {
    const options = { hostname, port, sourceTimeoutMs: pool.sourceTimeoutMs };
    // Tokens get no registry TTL: each run's own TTL is enforced by a timer.
    listener = Promise.resolve()
      .then(() =>
        kind === "gateway"
          ? startAssetGateway({ ...options, ttlMs: Infinity })
          : startSharedBridge(options)
      )
      .catch((error) => {
        pool.gateways.delete(key);
        throw listenFailed(`${kind} on ${where}`, error);
      });
    pool.gateways.set(key, listener);
    listener.then(
      (started) =>
        pool.log({ msg: `assets ${kind} started`, url: started.url }),
      () => {},
    );
  }
  return listener;
}

function listenFailed(what: string, error: unknown): RunnerError {
  const reason = error instanceof Error ? error.message : String(error);
  return new RunnerError(
    "assets.listen_failed",
    `The LangBot assets ${what} could not listen (${reason}). Choose a free ` +
      "langbot-assets-gateway-port or mcp-bridge-port, or another host, or set langbot-assets-enabled=false.",
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
