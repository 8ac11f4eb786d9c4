/**
 * The per-run LangBot assets MCP backend: JSON-RPC 2.0 (single messages and
 * batches) answering `initialize`, `ping`, `tools/list` and `tools/call` for
 * the six stable tools, authorized by the run's grant. Transport-free: the
 * HTTP bridge, the gateway and the daemon relay all call `handle`.
 *
 * `assets/mcp/` owns what answers an assets MCP request, whatever carried it:
 * the JSON-RPC framing (`jsonrpc.ts`), the six tools' definitions and
 * argument checks (`tools.ts`), answering a call (`tool_calls.ts`) from
 * inline data (`inline_source.ts`) or a remote source (`sources.ts`, with
 * signed callbacks in `callback_signature.ts`), and this backend. It checks
 * every call against the run's grant (`assets/grant.ts`); the transports
 * (bridge, gateway, `mcp-stdio`) and the wiring into runs stay in `assets/`.
 *
 * @module
 */

import {
  type AssetGrant,
  type RunAssetsSpec,
  usableToolNames,
} from "../grant.ts";
import {
  createCallbackSource,
  createUpstreamSource,
  type RemoteSource,
} from "./sources.ts";
import { callAssetTool, type RunToolSources } from "./tool_calls.ts";
import {
  type AssetToolName,
  isAssetToolName,
  toolDefinitions,
} from "./tools.ts";
import {
  dispatchJsonRpc,
  JSONRPC_ERRORS,
  JsonRpcFailure,
  type JsonRpcRequest,
} from "./jsonrpc.ts";

export type { JsonRpcRequest } from "./jsonrpc.ts";

/** The MCP protocol version the backend answers `initialize` with. */
export const MCP_PROTOCOL_VERSION = "2025-06-18";

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/** How a message reached the backend. */
export interface AssetAuth {
  /** The run token the transport resolved this backend with, if any. */
  runToken?: string;
}

/** Options for {@linkcode createAssetBackend}. */
export interface AssetBackendOptions {
  /** Gateway mode: tool schemas advertise and accept `run_token`. */
  gateway?: boolean;
  /**
   * `tools/list` names only the tools the run's grant makes usable (the
   * per-run bridge); otherwise, and always in gateway mode, it is the full
   * stable list that platforms cache.
   */
  listGrantedTools?: boolean;
  /** Deadline of one call forwarded to an upstream or callback. */
  sourceTimeoutMs?: number;
}

/** The assets MCP surface of one run. */
export interface AssetBackend {
  /** The run this backend serves. */
  readonly runId: string;
  /** Answers a JSON-RPC message or batch; null for notification-only input. */
  handle(message: unknown, auth?: AssetAuth): Promise<unknown | null>;
  /** Answers one structurally valid request (the result or error response). */
  handleRequest(
    request: JsonRpcRequest,
    auth?: AssetAuth,
  ): Promise<unknown | null>;
  /**
   * False while no run holds the endpoint (a warm agent between runs): its
   * token is then answered like an unknown one. Absent means always.
   */
  active?(): boolean;
}

/** Whether a backend answers now (see {@linkcode AssetBackend.active}). */
export function answersNow(backend: AssetBackend | undefined): boolean {
  return backend !== undefined && backend.active?.() !== false;
}

/** Options for {@linkcode answerCommonMethod}. */
export interface CommonMethodOptions {
  /** Gateway mode: schemas advertise `run_token`. */
  gateway?: boolean;
  /** When given, `tools/list` names only the tools this grant makes usable. */
  grant?: AssetGrant;
}

/** Answers the methods every assets endpoint shares; undefined for `tools/call`. */
export function answerCommonMethod(
  request: JsonRpcRequest,
  options: CommonMethodOptions,
): Record<string, unknown> | null | undefined {
  const result = (value: unknown) => ({
    jsonrpc: "2.0",
    id: request.id ?? null,
    result: value,
  });
  if (request.method === "initialize") {
    return result({
      protocolVersion: MCP_PROTOCOL_VERSION,
      capabilities: { tools: { listChanged: false } },
      serverInfo: {
        name: "langbot-assets",
        title: "LangBot assets",
        version: "0.1.0",
      },
      instructions:
        "LangBot assets of the current run: call langbot_list_assets first. Do not pass run_id.",
    });
  }
  if (request.method === "ping") return result({});
  if (request.method === "tools/list") {
    const tools = toolDefinitions(options);
    if (!options.grant) return result({ tools });
    const usable = usableToolNames(options.grant);
    return result({ tools: tools.filter((tool) => usable.has(tool.name)) });
  }
  if (request.method.startsWith("notifications/")) {
    return request.id === undefined ? null : result({});
  }
  if (request.method === "tools/call") return undefined;
  throw new JsonRpcFailure(
    JSONRPC_ERRORS.methodNotFound,
    `Method not found: ${request.method}`,
  );
}

/** Checks `tools/call` params; returns the tool name and raw arguments. */
export function toolCallParams(
  request: JsonRpcRequest,
): { name: AssetToolName; args: Record<string, unknown> } {
  const params = request.params;
  if (!isRecord(params) || typeof params.name !== "string") {
    throw new JsonRpcFailure(
      JSONRPC_ERRORS.invalidParams,
      "Invalid params: tools/call needs {name, arguments?}",
    );
  }
  if (!isAssetToolName(params.name)) {
    throw new JsonRpcFailure(
      JSONRPC_ERRORS.invalidParams,
      `Unknown tool: ${params.name}`,
    );
  }
  if (
    params.arguments !== undefined && params.arguments !== null &&
    !isRecord(params.arguments)
  ) {
    throw new JsonRpcFailure(
      JSONRPC_ERRORS.invalidParams,
      "Invalid params: arguments must be an object",
    );
  }
  return {
    name: params.name,
    args: (params.arguments ?? {}) as Record<string, unknown>,
  };
}

function remoteSourceOf(
  spec: RunAssetsSpec,
  options: AssetBackendOptions,
): RemoteSource | undefined {
  const source = spec.source;
  if (source && "upstream" in source) {
    return createUpstreamSource({
      ...source.upstream,
      timeoutMs: options.sourceTimeoutMs,
    });
  }
  if (source && "callback" in source) {
    return createCallbackSource({
      ...source.callback,
      runId: spec.runId,
      timeoutMs: options.sourceTimeoutMs,
    });
  }
  return undefined;
}

/** Creates the assets MCP backend of one run. */
export function createAssetBackend(
  spec: RunAssetsSpec,
  options: AssetBackendOptions = {},
): AssetBackend {
  const gateway = options.gateway ?? false;
  const sources: RunToolSources = {
    spec,
    gateway,
    remote: remoteSourceOf(spec, options),
    inline: spec.source && "inline" in spec.source
      ? spec.source.inline
      : undefined,
  };

  async function handleRequest(request: JsonRpcRequest, auth: AssetAuth = {}) {
    const common = answerCommonMethod(request, {
      gateway,
      grant: options.listGrantedTools && !gateway ? spec.grant : undefined,
    });
    if (common !== undefined) return common;
    const { name, args } = toolCallParams(request);
    return {
      jsonrpc: "2.0",
      id: request.id ?? null,
      result: await callAssetTool(sources, {
        name,
        rawArgs: args,
        runToken: auth.runToken,
      }),
    };
  }

  return {
    runId: spec.runId,
    handle: (message, auth = {}) =>
      dispatchJsonRpc(message, (request) => handleRequest(request, auth)),
    handleRequest,
  };
}
