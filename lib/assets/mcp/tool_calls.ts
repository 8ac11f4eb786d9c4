/**
 * Answers one run's `tools/call` for the six stable asset tools: the
 * arguments and the run's grant are checked first, then the call is answered
 * from the run's inline data or forwarded to its remote source.
 *
 * @module
 */

import {
  type AssetType,
  canPageHistory,
  describeTool,
  grantedTool,
  type InlineAssets,
  listAssets,
  retrievableKnowledgeBase,
  type RunAssetsSpec,
} from "../grant.ts";
import {
  type HistoryPageArgs,
  pageHistory,
  type RetrieveArgs,
  retrieveInline,
} from "./inline_source.ts";
import type { RemoteSource } from "./sources.ts";
import {
  type AssetToolName,
  type CallToolResult,
  checkToolArguments,
  toolFailure,
  toolSuccess,
} from "./tools.ts";

/** What one run's tool calls are answered from. */
export interface RunToolSources {
  /** The run's grant, event and conversation. */
  spec: RunAssetsSpec;
  /** Gateway mode: arguments may carry `run_token`. */
  gateway: boolean;
  /** The run's upstream or callback source, if it has one. */
  remote?: RemoteSource;
  /** The run's inline data, if that is its source. */
  inline?: InlineAssets;
}

/** One `tools/call` as it arrived. */
export interface AssetToolCall {
  /** The tool called. */
  name: AssetToolName;
  /** The arguments as given (possibly with `run_token`). */
  rawArgs: Record<string, unknown>;
  /** The run token the transport resolved the backend with, if any. */
  runToken?: string;
}

/** A call whose arguments passed the tool's schema. */
interface CheckedCall {
  name: AssetToolName;
  /** The checked arguments. */
  args: Record<string, unknown>;
  /** The raw arguments without `run_token`, as a remote source gets them. */
  forwarded: Record<string, unknown>;
}

/**
 * Answers one `tools/call` with a tool result; a bad `run_token`, bad
 * arguments, an ungranted asset or a missing source is a failure result.
 */
export async function callAssetTool(
  sources: RunToolSources,
  call: AssetToolCall,
): Promise<CallToolResult> {
  const { name, rawArgs } = call;
  const { spec, gateway } = sources;
  const argToken = rawArgs.run_token;
  if (
    gateway && typeof argToken === "string" && argToken !== "" &&
    call.runToken !== undefined &&
    argToken !== call.runToken
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
  const checkedCall = { name, args, forwarded };
  switch (name) {
    case "langbot_list_assets":
      return toolSuccess(listAssets(spec, {
        assetTypes: args.asset_types as AssetType[] | undefined,
        includeSchemas: args.include_schemas as boolean,
      }));
    case "langbot_get_current_event":
      return await currentEvent(sources, checkedCall);
    case "langbot_history_page":
      return await historyPage(sources, checkedCall);
    case "langbot_retrieve_knowledge":
      return await retrieveKnowledge(sources, checkedCall);
    case "langbot_get_tool_detail":
    case "langbot_call_tool":
      return await grantedToolCall(sources, checkedCall);
  }
}

function noSource(): CallToolResult {
  return toolFailure(
    "assets.no_source",
    "There is no asset source for this run; only langbot_get_current_event and langbot_list_assets work.",
  );
}

function forbidden(what: string): CallToolResult {
  return toolFailure(
    "assets.forbidden",
    `${what} is not granted to this run; call langbot_list_assets to see what is.`,
  );
}

async function currentEvent(
  { spec, remote, inline }: RunToolSources,
  { name, forwarded }: CheckedCall,
): Promise<CallToolResult> {
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

async function historyPage(
  { spec, remote, inline }: RunToolSources,
  { name, args, forwarded }: CheckedCall,
): Promise<CallToolResult> {
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

async function retrieveKnowledge(
  { spec, remote, inline }: RunToolSources,
  { name, args, forwarded }: CheckedCall,
): Promise<CallToolResult> {
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

/** `langbot_get_tool_detail` and `langbot_call_tool`. */
async function grantedToolCall(
  { spec, remote, inline }: RunToolSources,
  { name, args, forwarded }: CheckedCall,
): Promise<CallToolResult> {
  const operation = name === "langbot_get_tool_detail" ? "detail" : "call";
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
