/**
 * What a run may see: the run's asset spec (its authorization snapshot and
 * where answers come from) and the checks every LangBot asset tool applies
 * before it touches a source. See `docs/assets.md`.
 *
 * @module
 */

/** One message of a conversation's history, oldest first in a list. */
export interface HistoryItem {
  /** A stable id, when the source has one. */
  id?: string;
  /** `user`, `assistant`, … */
  role?: string;
  /** The message text. */
  text?: string;
  /** Attachments; returned only when `include_attachments` is true. */
  attachments?: unknown[];
  /** Anything else the source keeps (timestamps, sender, …). */
  [key: string]: unknown;
}

/** A knowledge base the run may use. */
export interface KnowledgeBaseGrant {
  /** The knowledge base id the agent passes as `kb_id`. */
  kb_id: string;
  /** A display name. */
  name?: string;
  /** The knowledge base type, as the host names it. */
  type?: string;
  /** Granted operations (`retrieve`); empty or absent means all. */
  operations?: string[];
}

/** A tool the run may inspect or call through `langbot_call_tool`. */
export interface ToolGrant {
  /** The tool's name. */
  tool_name: string;
  /** `plugin`, `mcp`, `platform`, or another host-defined type. */
  type?: "plugin" | "mcp" | "platform" | string;
  /** What the tool does. */
  description?: string;
  /** Granted operations (`detail`, `call`); empty or absent means all. */
  operations?: string[];
  /** The tool's parameter JSON schema, when known. */
  schema?: Record<string, unknown>;
}

/** A skill the host exposes to the run (listed, never executed here). */
export interface SkillGrant {
  /** The skill's name. */
  name: string;
  /** What it does. */
  description?: string;
  /** Anything else the host lists. */
  [key: string]: unknown;
}

/** The run's authorization snapshot, fixed when the run starts. */
export interface AssetGrant {
  /** Whether the agent may page the conversation history. */
  history?: boolean;
  /** Knowledge bases the run may use. */
  knowledgeBases?: KnowledgeBaseGrant[];
  /** Tools (plugin, MCP, platform) the run may inspect or call. */
  tools?: ToolGrant[];
  /** Skills listed to the agent. */
  skills?: SkillGrant[];
}

/** Inline knowledge: the snippets of one knowledge base. */
export interface InlineKnowledge {
  /** The knowledge base id. */
  kb_id: string;
  /** Its snippets. */
  snippets: {
    text: string;
    score?: number;
    metadata?: Record<string, unknown>;
  }[];
}

/** Read-only data supplied with the run itself. */
export interface InlineAssets {
  /** The current event (used when the spec has no top-level `event`). */
  event?: Record<string, unknown>;
  /** The conversation history, oldest first. */
  history?: HistoryItem[];
  /** Knowledge snippets per knowledge base. */
  knowledge?: InlineKnowledge[];
  /** A static result per tool name, answered by `langbot_call_tool`. */
  tools?: Record<string, unknown>;
}

/** Where the run's asset answers come from. */
export type AssetSourceSpec =
  | { upstream: { url: string; headers?: Record<string, string> } }
  | { callback: { url: string; secret: string } }
  | { inline: InlineAssets };

/** Everything the assets surface needs to know about one run. */
export interface RunAssetsSpec {
  /** The LangBot run id. */
  runId: string;
  /** The conversation the run belongs to. */
  conversationId?: string;
  /** The authorization snapshot. */
  grant: AssetGrant;
  /** The event that started the run. */
  event?: Record<string, unknown>;
  /** Where answers come from; without one only event and listing work. */
  source?: AssetSourceSpec;
}

/** The asset kinds `langbot_list_assets` can list. */
export const ASSET_TYPES = [
  "event",
  "history",
  "knowledge_bases",
  "tools",
  "platform_tools",
  "mcp_tools",
  "skills",
] as const;

/** One of {@linkcode ASSET_TYPES}. */
export type AssetType = typeof ASSET_TYPES[number];

const KB_OPERATIONS = ["retrieve"];
const TOOL_OPERATIONS = ["detail", "call"];

function effectiveOperations(
  granted: string[] | undefined,
  all: string[],
): string[] {
  return granted && granted.length > 0 ? [...granted] : [...all];
}

/** Whether the run may page its conversation history. */
export function canPageHistory(grant: AssetGrant): boolean {
  return grant.history === true;
}

/** The knowledge base grant for `kbId` if it allows `retrieve`. */
export function retrievableKnowledgeBase(
  grant: AssetGrant,
  kbId: string,
): KnowledgeBaseGrant | undefined {
  const kb = grant.knowledgeBases?.find((entry) => entry.kb_id === kbId);
  if (!kb) return undefined;
  return effectiveOperations(kb.operations, KB_OPERATIONS).includes("retrieve")
    ? kb
    : undefined;
}

/** The tool grant for `toolName` if it allows `operation` (`detail` or `call`). */
export function grantedTool(
  grant: AssetGrant,
  toolName: string,
  operation: "detail" | "call",
): ToolGrant | undefined {
  const tool = grant.tools?.find((entry) => entry.tool_name === toolName);
  if (!tool) return undefined;
  return effectiveOperations(tool.operations, TOOL_OPERATIONS).includes(
      operation,
    )
    ? tool
    : undefined;
}

/**
 * The asset tools a grant makes usable: event and listing always, history
 * when granted, retrieval when some knowledge base allows `retrieve`, tool
 * detail and call when some tool allows `detail` / `call`.
 */
export function usableToolNames(grant: AssetGrant): Set<string> {
  const names = new Set(["langbot_list_assets", "langbot_get_current_event"]);
  if (canPageHistory(grant)) names.add("langbot_history_page");
  if (
    (grant.knowledgeBases ?? []).some((kb) =>
      retrievableKnowledgeBase(grant, kb.kb_id)
    )
  ) {
    names.add("langbot_retrieve_knowledge");
  }
  const tools = grant.tools ?? [];
  if (tools.some((tool) => grantedTool(grant, tool.tool_name, "detail"))) {
    names.add("langbot_get_tool_detail");
  }
  if (tools.some((tool) => grantedTool(grant, tool.tool_name, "call"))) {
    names.add("langbot_call_tool");
  }
  return names;
}

/** The public description of a granted tool, as tool detail answers it. */
export function describeTool(tool: ToolGrant): Record<string, unknown> {
  return {
    tool_name: tool.tool_name,
    type: tool.type ?? "plugin",
    description: tool.description ?? "",
    operations: effectiveOperations(tool.operations, TOOL_OPERATIONS),
    schema: tool.schema ?? null,
  };
}

/** Options for {@linkcode listAssets}. */
export interface ListAssetsOptions {
  /** The kinds to list; all when absent. */
  assetTypes?: readonly AssetType[];
  /** Whether tool entries carry their parameter schema. */
  includeSchemas?: boolean;
}

/** The `langbot_list_assets` answer for a run. */
export function listAssets(
  spec: RunAssetsSpec,
  options: ListAssetsOptions = {},
): Record<string, unknown> {
  const types = options.assetTypes && options.assetTypes.length > 0
    ? [...new Set(options.assetTypes)]
    : [...ASSET_TYPES];
  const tools = spec.grant.tools ?? [];
  const toolEntry = (tool: ToolGrant) => ({
    tool_name: tool.tool_name,
    type: tool.type ?? "plugin",
    description: tool.description ?? "",
    operations: effectiveOperations(tool.operations, TOOL_OPERATIONS),
    ...(options.includeSchemas ? { schema: tool.schema ?? null } : {}),
  });
  const sections: Record<AssetType, () => unknown> = {
    event: () => ({ available: true, tool_name: "langbot_get_current_event" }),
    history: () => ({
      available: canPageHistory(spec.grant),
      tool_name: "langbot_history_page",
    }),
    knowledge_bases: () =>
      (spec.grant.knowledgeBases ?? []).map((kb) => ({
        kb_id: kb.kb_id,
        name: kb.name ?? kb.kb_id,
        type: kb.type ?? "",
        operations: effectiveOperations(kb.operations, KB_OPERATIONS),
      })),
    tools: () =>
      tools.filter((tool) => tool.type !== "platform" && tool.type !== "mcp")
        .map(toolEntry),
    platform_tools: () =>
      tools.filter((tool) => tool.type === "platform").map(toolEntry),
    mcp_tools: () =>
      tools.filter((tool) => tool.type === "mcp").map((tool) => ({
        tool_name: tool.tool_name,
        description: tool.description ?? "",
        ...(options.includeSchemas ? { schema: tool.schema ?? null } : {}),
      })),
    skills: () => (spec.grant.skills ?? []).map((skill) => ({ ...skill })),
  };
  const answer: Record<string, unknown> = {
    run_id: spec.runId,
    asset_types: types,
  };
  for (const type of types) answer[type] = sections[type]();
  return answer;
}
