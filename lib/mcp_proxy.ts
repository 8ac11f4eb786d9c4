/**
 * The daemon side's per-job MCP proxy: a localhost HTTP endpoint the agent
 * sees as the `langbot_agent` MCP server; every request body is forwarded to
 * the hub (as `mcp.request`) and its answer returned as JSON, `null` as 202.
 * Replies are byte-compatible with the Python daemon's `LocalMCPProxy`.
 *
 * @module
 */

import { Hono } from "hono";
import { type Json, MCP_REQUEST_TIMEOUT_MS } from "./relay.ts";
import { pythonJsonDumps } from "./relay/json.ts";
import { serveFetch } from "./net/fetch_server.ts";

/** The proxy's entry for ACP's `mcpServers` list. */
export interface McpServerEntry {
  /** Always `http`. */
  type: "http";
  /** The server name the agent sees. */
  name: string;
  /** `http://127.0.0.1:<port>/mcp`. */
  url: string;
  /** HTTP headers (none; ACP requires the key). */
  headers: { name: string; value: string }[];
}

/** Options of {@linkcode startMcpProxy}. */
export interface McpProxyOptions {
  /** Sends one MCP message (or batch) to the hub; resolves with its answer. */
  forward: (payload: Json) => Promise<unknown>;
  /** How long one request may take (default 60 s). */
  timeoutMs?: number;
  /** The server name (default `langbot_agent`). */
  serverName?: string;
}

/** A running proxy. */
export interface McpProxy {
  /** `http://127.0.0.1:<port>/mcp`. */
  url: string;
  /** The entry to add to the agent's `mcpServers`. */
  serverEntry: McpServerEntry;
  /** Stops the server. */
  close(): Promise<void>;
}

const JSON_TYPE = "application/json; charset=utf-8";

function jsonResponse(status: number, payload: unknown): Response {
  const body = new TextEncoder().encode(pythonJsonDumps(payload));
  return new Response(body, {
    status,
    headers: { "content-type": JSON_TYPE, "content-length": `${body.length}` },
  });
}

function requestId(payload: Json): Json {
  if (
    typeof payload === "object" && payload !== null && !Array.isArray(payload)
  ) {
    return payload.id ?? null;
  }
  return null;
}

async function forwardWithTimeout(
  options: McpProxyOptions,
  payload: Json,
): Promise<unknown> {
  const timeoutMs = options.timeoutMs ?? MCP_REQUEST_TIMEOUT_MS;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`MCP request timed out after ${timeoutMs} ms`)),
      timeoutMs,
    );
  });
  try {
    return await Promise.race([options.forward(payload), timedOut]);
  } finally {
    clearTimeout(timer);
  }
}

/** Starts the proxy on `127.0.0.1:<random port>`. */
export function startMcpProxy(options: McpProxyOptions): McpProxy {
  const app = new Hono();
  app.get("/healthz", () => jsonResponse(200, { ok: true }));
  const handle = async (request: Request): Promise<Response> => {
    const body = await request.text();
    let payload: Json;
    try {
      payload = body ? JSON.parse(body) : {};
    } catch (error) {
      return jsonResponse(400, {
        jsonrpc: "2.0",
        id: null,
        error: {
          code: -32700,
          message: `Parse error: ${(error as Error).message}`,
        },
      });
    }
    let result: unknown;
    try {
      result = await forwardWithTimeout(options, payload);
    } catch (error) {
      result = {
        jsonrpc: "2.0",
        id: requestId(payload),
        error: {
          code: -32000,
          message: error instanceof Error ? error.message : String(error),
        },
      };
    }
    if (result === null || result === undefined) {
      return new Response("", {
        status: 202,
        headers: { "content-length": "0" },
      });
    }
    return jsonResponse(200, result);
  };
  app.post("/mcp", (c) => handle(c.req.raw));
  app.post("/mcp/http", (c) => handle(c.req.raw));
  const server = serveFetch(app.fetch, { name: "mcp proxy" });
  const url = `http://127.0.0.1:${server.port}/mcp`;
  return {
    url,
    serverEntry: {
      type: "http",
      name: options.serverName ?? "langbot_agent",
      url,
      headers: [],
    },
    close: () => server.close(),
  };
}
