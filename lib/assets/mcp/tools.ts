/**
 * The six stable LangBot asset tools: their MCP definitions (names, input
 * schemas) and the argument checker that enforces exactly those schemas.
 *
 * @module
 */

import type { ErrorCode } from "../../errors.ts";
import { ASSET_TYPES } from "../grant.ts";

/** The name of the assets server in the agent's `mcpServers`. */
export const ASSETS_MCP_SERVER_NAME = "langbot_assets";

/** A JSON schema of the small subset these tools use. */
export interface ArgSchema {
  type: "object" | "string" | "integer" | "boolean" | "array";
  description?: string;
  properties?: Record<string, ArgSchema>;
  required?: string[];
  additionalProperties?: boolean;
  items?: ArgSchema;
  enum?: readonly string[];
  minimum?: number;
  maximum?: number;
  minLength?: number;
  default?: unknown;
}

/** An MCP tool definition as `tools/list` answers it. */
export interface ToolDefinition {
  name: string;
  title?: string;
  description: string;
  inputSchema: ArgSchema;
  annotations: { readOnlyHint: boolean; openWorldHint: boolean };
}

/** The names of the six stable tools. */
export type AssetToolName =
  | "langbot_list_assets"
  | "langbot_get_current_event"
  | "langbot_history_page"
  | "langbot_retrieve_knowledge"
  | "langbot_get_tool_detail"
  | "langbot_call_tool";

function objectSchema(
  properties: Record<string, ArgSchema>,
  required: string[] = [],
): ArgSchema {
  return {
    type: "object",
    properties,
    ...(required.length > 0 ? { required } : {}),
    additionalProperties: false,
  };
}

const TOOLS: readonly ToolDefinition[] = [
  {
    name: "langbot_list_assets",
    description:
      "List the LangBot assets this run may use: current event, conversation history, knowledge bases, tools, platform tools, MCP tools and skills.",
    inputSchema: objectSchema({
      asset_types: {
        type: "array",
        description: "Asset kinds to list; all when omitted.",
        items: { type: "string", enum: ASSET_TYPES },
      },
      include_schemas: {
        type: "boolean",
        description: "Include each tool's parameter schema.",
        default: false,
      },
    }),
    annotations: { readOnlyHint: true, openWorldHint: false },
  },
  {
    name: "langbot_get_current_event",
    description: "Get the LangBot event (message) that started this run.",
    inputSchema: objectSchema({}),
    annotations: { readOnlyHint: true, openWorldHint: false },
  },
  {
    name: "langbot_history_page",
    description:
      "Read one page of this conversation's history. Pages go backward from the newest message by default; pass the returned cursor to continue.",
    inputSchema: objectSchema({
      conversation_id: {
        type: "string",
        description: "The conversation; defaults to this run's conversation.",
      },
      before_cursor: {
        type: "string",
        description: "Return messages older than this cursor.",
      },
      after_cursor: {
        type: "string",
        description: "Return messages newer than this cursor.",
      },
      limit: {
        type: "integer",
        description: "Messages per page.",
        minimum: 1,
        maximum: 100,
        default: 50,
      },
      direction: {
        type: "string",
        enum: ["backward", "forward"],
        description:
          "backward: newest first pages; forward: oldest first pages.",
        default: "backward",
      },
      include_attachments: {
        type: "boolean",
        description: "Include message attachments.",
      },
    }),
    annotations: { readOnlyHint: true, openWorldHint: false },
  },
  {
    name: "langbot_retrieve_knowledge",
    description:
      "Retrieve passages from a knowledge base granted to this run. Give `query_text` (or `query`).",
    inputSchema: objectSchema({
      kb_id: {
        type: "string",
        description: "The knowledge base id.",
        minLength: 1,
      },
      query_text: { type: "string", description: "What to search for." },
      query: { type: "string", description: "Alias of query_text." },
      top_k: {
        type: "integer",
        description: "How many passages to return.",
        minimum: 1,
        maximum: 20,
        default: 5,
      },
      filters: {
        type: "object",
        description: "Metadata filters (key: value).",
      },
    }, ["kb_id"]),
    annotations: { readOnlyHint: true, openWorldHint: false },
  },
  {
    name: "langbot_get_tool_detail",
    description:
      "Describe a LangBot tool granted to this run, with its parameter schema.",
    inputSchema: objectSchema({
      tool_name: {
        type: "string",
        description: "The tool's name.",
        minLength: 1,
      },
    }, ["tool_name"]),
    annotations: { readOnlyHint: true, openWorldHint: false },
  },
  {
    name: "langbot_call_tool",
    description:
      "Call a LangBot tool (plugin, MCP or platform action) granted to this run with its parameters.",
    inputSchema: objectSchema({
      tool_name: {
        type: "string",
        description: "The tool's name.",
        minLength: 1,
      },
      parameters: { type: "object", description: "The tool's arguments." },
    }, ["tool_name"]),
    annotations: { readOnlyHint: false, openWorldHint: true },
  },
];

const RUN_TOKEN_PROPERTY: ArgSchema = {
  type: "string",
  description:
    "Run token, only for clients that cannot send per-run headers; leave empty otherwise.",
};

/** The tool definitions; in gateway mode each schema also offers `run_token`. */
export function toolDefinitions(
  options: { gateway?: boolean } = {},
): ToolDefinition[] {
  return TOOLS.map((tool) => {
    const copy = structuredClone(tool) as ToolDefinition;
    if (options.gateway) {
      copy.inputSchema.properties!.run_token = { ...RUN_TOKEN_PROPERTY };
    }
    return copy;
  });
}

/** Whether `name` is one of the six stable tools. */
export function isAssetToolName(name: string): name is AssetToolName {
  return TOOLS.some((tool) => tool.name === name);
}

/** The outcome of checking a tool's arguments. */
export type ArgsCheck =
  | { ok: true; value: Record<string, unknown> }
  | { ok: false; problem: string };

function typeOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number" && Number.isInteger(value)) return "integer";
  return typeof value;
}

function checkValue(
  schema: ArgSchema,
  value: unknown,
  path: string,
): string | undefined {
  const actual = typeOf(value);
  if (schema.type === "object" ? actual !== "object" : actual !== schema.type) {
    return `${path} must be ${
      schema.type === "integer" ? "an integer" : `a ${schema.type}`
    }`;
  }
  if (schema.enum && !schema.enum.includes(value as string)) {
    return `${path} must be one of ${
      schema.enum.map((v) => JSON.stringify(v)).join(", ")
    }`;
  }
  if (typeof value === "number") {
    if (schema.minimum !== undefined && value < schema.minimum) {
      return `${path} must be at least ${schema.minimum}`;
    }
    if (schema.maximum !== undefined && value > schema.maximum) {
      return `${path} must be at most ${schema.maximum}`;
    }
  }
  if (
    typeof value === "string" && schema.minLength &&
    value.trim().length < schema.minLength
  ) {
    return `${path} must not be blank`;
  }
  if (Array.isArray(value) && schema.items) {
    for (const [index, item] of value.entries()) {
      const problem = checkValue(schema.items, item, `${path}[${index}]`);
      if (problem) return problem;
    }
  }
  if (actual === "object" && schema.properties) {
    const record = value as Record<string, unknown>;
    for (const key of Object.keys(record)) {
      if (
        !(key in schema.properties) && schema.additionalProperties === false
      ) {
        const known = Object.keys(schema.properties);
        return `${
          path === "arguments" ? "" : `${path}.`
        }${key} is not a known argument` +
          ` (known: ${known.length > 0 ? known.join(", ") : "none"})`;
      }
    }
    for (const key of schema.required ?? []) {
      if (record[key] === undefined) return `${key} is required`;
    }
    for (const [key, property] of Object.entries(schema.properties)) {
      if (record[key] === undefined) continue;
      const problem = checkValue(property, record[key], key);
      if (problem) return problem;
    }
  }
  return undefined;
}

/**
 * Checks `args` against the tool's schema (gateway mode also accepts
 * `run_token`) and returns them with defaults filled in and `run_token` removed.
 */
export function checkToolArguments(
  name: AssetToolName,
  args: unknown,
  options: { gateway?: boolean } = {},
): ArgsCheck {
  const schema =
    toolDefinitions(options).find((tool) => tool.name === name)!.inputSchema;
  const given = args === undefined || args === null ? {} : args;
  const problem = checkValue(schema, given, "arguments");
  if (problem) return { ok: false, problem };
  const value: Record<string, unknown> = {
    ...(given as Record<string, unknown>),
  };
  delete value.run_token;
  for (const [key, property] of Object.entries(schema.properties ?? {})) {
    if (value[key] === undefined && property.default !== undefined) {
      value[key] = property.default;
    }
  }
  if (name === "langbot_retrieve_knowledge") {
    const text = [value.query_text, value.query].find((q) =>
      typeof q === "string" && q.trim() !== ""
    );
    if (text === undefined) {
      return {
        ok: false,
        problem: "query_text (or query) must be given and not blank",
      };
    }
    value.query_text = text;
  }
  return { ok: true, value };
}

/** An MCP `tools/call` result. */
export interface CallToolResult {
  content: { type: "text"; text: string }[];
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
}

/** A successful tool result; a non-object value is wrapped as `{result}`. */
export function toolSuccess(value: unknown): CallToolResult {
  const structured = typeOf(value) === "object"
    ? value as Record<string, unknown>
    : { result: value ?? null };
  return {
    content: [{ type: "text", text: JSON.stringify(structured) }],
    structuredContent: structured,
  };
}

/** A failed tool result whose text starts with the stable failure code. */
export function toolFailure(code: ErrorCode, message: string): CallToolResult {
  return {
    isError: true,
    content: [{ type: "text", text: `${code}: ${message}` }],
  };
}
