/**
 * The assets MCP surface over HTTP (`POST /mcp`, `GET /healthz`): the
 * per-run ephemeral bridge and the long-lived gateway that serves many runs
 * by run token.
 *
 * @module
 */

import type { McpServer } from "@agentclientprotocol/sdk";
import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { RunAssetsSpec } from "./grant.ts";
import {
  answerCommonMethod,
  answersNow,
  type AssetBackend,
  createAssetBackend,
} from "./mcp/server.ts";
import {
  dispatchJsonRpc,
  JSONRPC_ERRORS,
  jsonRpcError,
} from "./mcp/jsonrpc.ts";
import { createTokenRegistry, type TokenRegistry } from "./tokens.ts";
import { ASSETS_MCP_SERVER_NAME } from "./mcp/tools.ts";
import { serveFetch } from "../net/fetch_server.ts";

export { ASSETS_MCP_SERVER_NAME };

/** The default request body limit: 1 MiB. */
export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;

/** The header that may carry the run token instead of `Authorization`. */
export const ASSETS_TOKEN_HEADER = "X-LangBot-Assets-Token";

const UNAUTHORIZED_CODE = -32001;

/** The ACP `mcpServers` entry of the assets server (an HTTP server). */
export type AssetsMcpServer = Extract<McpServer, { type: "http" }>;

/** A transport answer: 401, or a JSON-RPC reply (null: nothing to send). */
type RouteAnswer = { unauthorized: true } | {
  unauthorized?: false;
  reply: unknown | null;
};

type Route = (
  message: unknown,
  headerToken: string | undefined,
) => Promise<RouteAnswer>;

function headerToken(request: Request): string | undefined {
  const authorization = request.headers.get("authorization");
  const bearer = authorization?.match(/^Bearer\s+(.+)$/i)?.[1]?.trim();
  if (bearer) return bearer;
  return request.headers.get(ASSETS_TOKEN_HEADER)?.trim() || undefined;
}

function json(
  body: unknown,
  status: number,
  headers: Record<string, string> = {},
): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json", ...headers },
  });
}

function unauthorized(): Response {
  return json(
    jsonRpcError(
      null,
      UNAUTHORIZED_CODE,
      "assets.unauthorized: this request has no valid run token. Send the current run's token as " +
        `Authorization: Bearer <token> (or ${ASSETS_TOKEN_HEADER}, or the run_token argument ` +
        "on a gateway); tokens stop working when their run ends.",
      { code: "assets.unauthorized" },
    ),
    401,
    { "www-authenticate": 'Bearer realm="langbot-assets"' },
  );
}

function createAssetsApp(route: Route, maxBodyBytes: number): Hono {
  const app = new Hono();
  app.get("/healthz", (c) => c.json({ ok: true }));
  const limit = bodyLimit({
    maxSize: maxBodyBytes,
    onError: () =>
      json(
        jsonRpcError(
          null,
          JSONRPC_ERRORS.invalidRequest,
          `assets.request_too_large: the request body exceeds ${maxBodyBytes} bytes; send smaller requests.`,
          { code: "assets.request_too_large" },
        ),
        413,
        { connection: "close" },
      ),
  });
  for (const path of ["/mcp", "/mcp/http"]) {
    app.post(path, limit, async (c) => {
      let message: unknown;
      try {
        message = JSON.parse(await c.req.text());
      } catch {
        return json(
          jsonRpcError(
            null,
            JSONRPC_ERRORS.parseError,
            "Parse error: the body is not JSON",
          ),
          400,
        );
      }
      const answer = await route(message, headerToken(c.req.raw));
      if (answer.unauthorized) return unauthorized();
      if (answer.reply === null) return new Response(null, { status: 202 });
      return json(answer.reply, 200);
    });
    app.on(["GET", "DELETE"], path, () =>
      json(
        jsonRpcError(
          null,
          JSONRPC_ERRORS.invalidRequest,
          "Use POST for MCP requests",
        ),
        405,
        { allow: "POST" },
      ));
  }
  return app;
}

interface ServeOptions {
  hostname?: string;
  port?: number;
  maxBodyBytes?: number;
}

function serve(route: Route, options: ServeOptions) {
  const app = createAssetsApp(
    route,
    options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES,
  );
  const server = serveFetch(app.fetch, {
    hostname: options.hostname ?? "127.0.0.1",
    port: options.port ?? 0,
    name: "assets",
  });
  const host = server.hostname.includes(":")
    ? `[${server.hostname}]`
    : server.hostname;
  return { server, url: `http://${host}:${server.port}/mcp` };
}

function mcpServerEntry(url: string, token: string): AssetsMcpServer {
  return {
    type: "http",
    name: ASSETS_MCP_SERVER_NAME,
    url,
    headers: [{ name: "Authorization", value: `Bearer ${token}` }],
  };
}

/** Options for {@linkcode startEphemeralBridge}. */
export interface EphemeralBridgeOptions {
  /** Interface to bind; default `127.0.0.1`. */
  hostname?: string;
  /** Port; default 0 (random). */
  port?: number;
  /** Request body limit in bytes; default 1 MiB. */
  maxBodyBytes?: number;
  /** Deadline of one call forwarded to the run's upstream or callback. */
  sourceTimeoutMs?: number;
  /** Token lifetime in milliseconds; default Infinity (until `close()`). */
  ttlMs?: number;
  /** The clock for token expiry (tests inject one). */
  now?: () => number;
  /** Serve this backend instead of one made from the spec (a warm agent's). */
  backend?: AssetBackend;
}

/** A running per-run bridge. */
export interface EphemeralBridge {
  /** The MCP endpoint (`http://127.0.0.1:<port>/mcp`). */
  url: string;
  /** The run's bearer token (never log it). */
  token: string;
  /** The entry to add to the agent's ACP `mcpServers`. */
  mcpServer: AssetsMcpServer;
  /** Revokes the token and stops the server. */
  close(): Promise<void>;
}

/**
 * Starts a bridge serving one run's assets on its own port until `close()`;
 * its token stops working after `ttlMs`.
 */
export function startEphemeralBridge(
  spec: RunAssetsSpec,
  options: EphemeralBridgeOptions = {},
): Promise<EphemeralBridge> {
  const registry = createTokenRegistry<AssetBackend>({
    ttlMs: options.ttlMs ?? Infinity,
    now: options.now,
  });
  const backend = options.backend ?? createAssetBackend(spec, {
    sourceTimeoutMs: options.sourceTimeoutMs,
    listGrantedTools: true,
  });
  const token = registry.issue(spec.runId, backend);
  const { server, url } = serve(bridgeRoute(registry), options);
  let closed: Promise<void> | undefined;
  return Promise.resolve({
    url,
    token,
    mcpServer: mcpServerEntry(url, token),
    close() {
      registry.clear();
      closed ??= server.close();
      return closed;
    },
  });
}

/** Every request needs a run token; it selects the run's backend. */
function bridgeRoute(registry: TokenRegistry<AssetBackend>): Route {
  return async (message, presented) => {
    const resolved = registry.resolve(presented);
    if (!resolved || !answersNow(resolved)) return { unauthorized: true };
    return { reply: await resolved.handle(message, { runToken: presented }) };
  };
}

/** Options for {@linkcode startSharedBridge}. */
export interface SharedBridgeOptions {
  /** Interface to bind (`mcp-bridge-host`). */
  hostname: string;
  /** Port (`mcp-bridge-port`). */
  port: number;
  /** Request body limit in bytes; default 1 MiB. */
  maxBodyBytes?: number;
  /** Deadline of one call forwarded to a run's upstream or callback. */
  sourceTimeoutMs?: number;
}

/**
 * Starts one listener that serves many runs as per-run bridges do (each run
 * by its own token, `tools/list` narrowed to its grant), for
 * `mcp-bridge-transport=http`: the operator's fixed address that a public URL
 * leads to. Registrations live until revoked; `close()` stops it.
 */
export function startSharedBridge(
  options: SharedBridgeOptions,
): Promise<AssetGateway> {
  const registry = createTokenRegistry<AssetBackend>({ ttlMs: Infinity });
  const { server, url } = serve(bridgeRoute(registry), options);
  let closed: Promise<void> | undefined;
  return Promise.resolve({
    url,
    register(spec) {
      const backend = createAssetBackend(spec, {
        sourceTimeoutMs: options.sourceTimeoutMs,
        listGrantedTools: true,
      });
      const token = registry.issue(spec.runId, backend);
      return {
        token,
        mcpServer: mcpServerEntry(url, token),
        revoke: () => registry.revokeToken(token),
      };
    },
    close() {
      registry.clear();
      closed ??= server.close();
      return closed;
    },
  });
}

/** Options for {@linkcode startAssetGateway}. */
export interface AssetGatewayOptions {
  /** Interface to bind; default `127.0.0.1`. */
  hostname?: string;
  /** Port; default 0 (random). Fix it when a platform registers the URL. */
  port?: number;
  /** The externally reachable MCP URL, used instead of the bound one. */
  publicUrl?: string;
  /** Run token lifetime in milliseconds. */
  ttlMs: number;
  /** Request body limit in bytes; default 1 MiB. */
  maxBodyBytes?: number;
  /** Deadline of one call forwarded to a run's upstream or callback. */
  sourceTimeoutMs?: number;
  /** The clock for token expiry (tests inject one). */
  now?: () => number;
}

/** A run registered on the gateway. */
export interface GatewayRegistration {
  /** The run's token (never log it). */
  token: string;
  /** The entry to add to the agent's ACP `mcpServers`. */
  mcpServer: AssetsMcpServer;
  /** Ends the token now (call when the run ends). */
  revoke(): void;
}

/** A running long-lived gateway (or shared bridge): one listener for many runs. */
export interface AssetGateway {
  /** The MCP endpoint (the public URL when configured). */
  url: string;
  /** Registers a run (or a warm agent's `backend`) and issues its token. */
  register(spec: RunAssetsSpec, backend?: AssetBackend): GatewayRegistration;
  /** Revokes every token and stops the server. */
  close(): Promise<void>;
}

function argumentToken(message: unknown): string | undefined {
  const request = message as {
    method?: unknown;
    params?: { arguments?: { run_token?: unknown } };
  };
  if (request?.method !== "tools/call") return undefined;
  const token = request.params?.arguments?.run_token;
  return typeof token === "string" && token !== "" ? token : undefined;
}

function gatewayRoute(tokens: TokenRegistry<AssetBackend>): Route {
  // A warm agent's token between its runs is answered like an unknown one.
  const registry = {
    resolve: (token: string | undefined) => {
      const backend = tokens.resolve(token);
      return answersNow(backend) ? backend : undefined;
    },
  };
  return async (message, presented) => {
    const headerBackend = registry.resolve(presented);
    if (presented !== undefined && !headerBackend) {
      return { unauthorized: true };
    }
    const members = Array.isArray(message) ? message : [message];
    for (const member of members) {
      if ((member as { method?: unknown })?.method !== "tools/call") continue;
      if (!registry.resolve(argumentToken(member) ?? presented)) {
        return { unauthorized: true };
      }
    }
    const reply = await dispatchJsonRpc(message, async (request) => {
      if (request.method === "tools/call") {
        const token = argumentToken(request) ?? presented;
        const backend = registry.resolve(token);
        if (!backend) {
          return jsonRpcError(
            request.id ?? null,
            UNAUTHORIZED_CODE,
            "assets.unauthorized: the run token expired.",
          );
        }
        return await backend.handleRequest(request, { runToken: token });
      }
      if (headerBackend) {
        return await headerBackend.handleRequest(request, {
          runToken: presented,
        });
      }
      return answerCommonMethod(request, { gateway: true }) ?? null;
    });
    return { reply };
  };
}

/** Starts the long-lived gateway serving every registered run by token. */
export function startAssetGateway(
  options: AssetGatewayOptions,
): Promise<AssetGateway> {
  const registry = createTokenRegistry<AssetBackend>({
    ttlMs: options.ttlMs,
    now: options.now,
  });
  const { server, url: boundUrl } = serve(gatewayRoute(registry), options);
  const url = options.publicUrl ?? boundUrl;
  let closed: Promise<void> | undefined;
  return Promise.resolve({
    url,
    register(spec, warmBackend) {
      const backend = warmBackend ?? createAssetBackend(spec, {
        gateway: true,
        sourceTimeoutMs: options.sourceTimeoutMs,
      });
      const token = registry.issue(spec.runId, backend);
      return {
        token,
        mcpServer: mcpServerEntry(url, token),
        revoke: () => registry.revokeToken(token),
      };
    },
    close() {
      registry.clear();
      closed ??= server.close();
      return closed;
    },
  });
}
