/**
 * The per-run LangBot assets MCP backend: JSON-RPC 2.0 (single messages and
 * batches) answering `initialize`, `ping`, `tools/list` and `tools/call` for
 * the six stable tools, authorized by the run's grant. Transport-free: the
 * HTTP bridge, the gateway and the daemon relay all call `handle`.
 *
 * @module
 */

import {
  type AssetGrant,
  type AssetType,
  canPageHistory,
  describeTool,
  grantedTool,
  type InlineAssets,
  listAssets,
  retrievableKnowledgeBase,
  type RunAssetsSpec,
  usableToolNames,
} from "./grant.ts";
import {
  type HistoryPageArgs,
  pageHistory,
  type RetrieveArgs,
  retrieveInline,
} from "./inline_source.ts";
import {
  createCallbackSource,
  createUpstreamSource,
  type RemoteSource,
} from "./sources.ts";
import {
  type AssetToolName,
  type CallToolResult,
  checkToolArguments,
  isAssetToolName,
  toolDefinitions,
  toolFailure,
  toolSuccess,
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
  const remote = remoteSourceOf(spec, options);
  const inline: InlineAssets | undefined =
    spec.source && "inline" in spec.source ? spec.source.inline : undefined;
  const noSource = () =>
    toolFailure(
      "assets.no_source",
      "There is no asset source for this run; only langbot_get_current_event and langbot_list_assets work.",
    );
  const forbidden = (what: string) =>
    toolFailure(
      "assets.forbidden",
      `${what} is not granted to this run; call langbot_list_assets to see what is.`,
    );

  async function callTool(
    name: AssetToolName,
    rawArgs: Record<string, unknown>,
    auth: AssetAuth,
  ): Promise<CallToolResult> {
    const argToken = rawArgs.run_token;
    if (
      gateway && typeof argToken === "string" && argToken !== "" &&
      auth.runToken !== undefined &&
      argToken !== auth.runToken
    ) {
      return toolFailure(
        "assets.unauthorized",
        "The run_token does not belong to this run.",
      );
    }
    const checked = checkToolArguments(name, rawArgs, { gateway });
    if (!checked.ok) {
      return toolFailure(
        "assets.invalid_arguments",
        `${name}: ${checked.problem}.`,
      );
    }
    const args = checked.value;
    const forwarded = { ...rawArgs };
    delete forwarded.run_token;
    switch (name) {
      case "langbot_list_assets":
        return toolSuccess(listAssets(spec, {
          assetTypes: args.asset_types as AssetType[] | undefined,
          includeSchemas: args.include_schemas as boolean,
        }));
      case "langbot_get_current_event": {
        const event = spec.event ?? inline?.event;
        if (event === undefined && remote) {
          return await remote.callTool(name, forwarded);
        }
        return toolSuccess({
          run_id: spec.runId,
          conversation_id: spec.conversationId ?? null,
          event: event ?? null,
        });
      }
      case "langbot_history_page": {
        if (!canPageHistory(spec.grant)) {
          return forbidden("Conversation history");
        }
        if (
          typeof args.conversation_id === "string" &&
          spec.conversationId !== undefined &&
          args.conversation_id !== spec.conversationId
        ) {
          return forbidden(
            `Conversation ${JSON.stringify(args.conversation_id)}`,
          );
        }
        if (remote) return await remote.callTool(name, forwarded);
        if (!inline) return noSource();
        const paged = pageHistory(
          inline.history ?? [],
          args as unknown as HistoryPageArgs,
        );
        if (!paged.ok) {
          return toolFailure(
            "assets.invalid_arguments",
            `${name}: ${paged.problem}.`,
          );
        }
        return toolSuccess({
          conversation_id: spec.conversationId ?? null,
          ...paged.page,
        });
      }
      case "langbot_retrieve_knowledge": {
        if (!retrievableKnowledgeBase(spec.grant, args.kb_id as string)) {
          return forbidden(
            `Knowledge base ${JSON.stringify(args.kb_id)} (retrieve)`,
          );
        }
        if (remote) return await remote.callTool(name, forwarded);
        if (!inline) return noSource();
        return toolSuccess(
          retrieveInline(
            inline.knowledge ?? [],
            args as unknown as RetrieveArgs,
          ),
        );
      }
      case "langbot_get_tool_detail":
      case "langbot_call_tool": {
        const operation = name === "langbot_get_tool_detail"
          ? "detail"
          : "call";
        const toolName = args.tool_name as string;
        const tool = grantedTool(spec.grant, toolName, operation);
        if (!tool) {
          return forbidden(`Tool ${JSON.stringify(toolName)} (${operation})`);
        }
        if (remote) return await remote.callTool(name, forwarded);
        if (!inline) return noSource();
        if (operation === "detail") return toolSuccess(describeTool(tool));
        if (!inline.tools || !Object.hasOwn(inline.tools, toolName)) {
          return toolFailure(
            "assets.source_failed",
            `The run's inline data has no result for tool ${
              JSON.stringify(toolName)
            }.`,
          );
        }
        return toolSuccess(inline.tools[toolName]);
      }
    }
  }

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
      result: await callTool(name, args, auth),
    };
  }

  return {
    runId: spec.runId,
    handle: (message, auth = {}) =>
      dispatchJsonRpc(message, (request) => handleRequest(request, auth)),
    handleRequest,
  };
}
