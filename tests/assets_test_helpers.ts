/**
 * Shared fixtures of the assets tests: a sample run spec, an MCP HTTP client
 * and a counting test server on 127.0.0.1.
 *
 * @module
 */

import type { HistoryItem, RunAssetsSpec } from "../lib/assets/grant.ts";
import type { RunAssetsRequest } from "../lib/assets/request.ts";

/** `count` history items, oldest first, ids `m0`…; every third has an attachment. */
export function sampleHistory(count: number): HistoryItem[] {
  return Array.from({ length: count }, (_, index) => ({
    id: `m${index}`,
    role: index % 2 === 0 ? "user" : "assistant",
    text: `message ${index}`,
    ...(index % 3 === 0 ? { attachments: [{ name: `file${index}.txt` }] } : {}),
  }));
}

/** A run spec with a full grant; `source` defaults to inline data. */
export function sampleSpec(
  runId: string,
  source: RunAssetsSpec["source"] = {
    inline: {
      history: sampleHistory(5),
      knowledge: [{
        kb_id: "kb-docs",
        snippets: [
          { text: "Deno runs TypeScript directly.", metadata: { lang: "en" } },
          { text: "Hono is a small web framework.", metadata: { lang: "en" } },
          {
            text: "TypeScript adds types to JavaScript.",
            metadata: { lang: "en" },
          },
        ],
      }],
      tools: { weather: { city: "Paris", celsius: 21 }, echo: "plain text" },
    },
  },
): RunAssetsSpec {
  return {
    runId,
    conversationId: `conv-${runId}`,
    event: { type: "message", text: `hello from ${runId}` },
    grant: {
      history: true,
      knowledgeBases: [
        {
          kb_id: "kb-docs",
          name: "Docs",
          type: "vector",
          operations: ["retrieve"],
        },
        { kb_id: "kb-listed", name: "Listed only", operations: ["list"] },
      ],
      tools: [
        {
          tool_name: "weather",
          type: "plugin",
          description: "Weather by city",
          schema: { type: "object", properties: { city: { type: "string" } } },
        },
        { tool_name: "echo", type: "plugin", operations: ["call"] },
        { tool_name: "detail_only", type: "plugin", operations: ["detail"] },
        {
          tool_name: "send_message",
          type: "platform",
          description: "Reply in the chat",
        },
        { tool_name: "search_web", type: "mcp", description: "Web search" },
      ],
      skills: [{ name: "summarize", description: "Summaries" }],
    },
    source,
  };
}

/** The HTTP status and parsed body of one MCP POST. */
export interface McpReply {
  status: number;
  body: unknown;
}

/** POSTs `message` (JSON-encoded unless a string) to an MCP endpoint. */
export async function postMcp(
  url: string,
  message: unknown,
  headers: Record<string, string> = {},
): Promise<McpReply> {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof message === "string" ? message : JSON.stringify(message),
  });
  const text = await response.text();
  return {
    status: response.status,
    body: text === "" ? null : JSON.parse(text),
  };
}

/** An MCP server entry as an agent's `session/new` gets it: its URL and headers. */
export interface McpServerEntry {
  url?: unknown;
  headers?: unknown;
}

/**
 * The HTTP status of a `langbot_list_assets` call POSTed to `entry`'s URL
 * with its headers (its token): what anyone holding the entry gets.
 */
export async function listAssetsStatus(entry: McpServerEntry): Promise<number> {
  const headers = (entry.headers ?? []) as { name: string; value: string }[];
  const response = await fetch(String(entry.url), {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...Object.fromEntries(headers.map((h) => [h.name, h.value])),
    },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "tools/call",
      params: { name: "langbot_list_assets", arguments: {} },
    }),
  });
  await response.body?.cancel();
  return response.status;
}

/** An MCP tool result as the tests read it. */
export interface ToolResult {
  content: { type: string; text: string }[];
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
}

let nextId = 1;

/** Calls a tool; fails the test unless the HTTP status is 200 with a result. */
export async function callTool(
  url: string,
  name: string,
  args: Record<string, unknown>,
  headers: Record<string, string> = {},
): Promise<ToolResult> {
  const reply = await postMcp(url, {
    jsonrpc: "2.0",
    id: nextId++,
    method: "tools/call",
    params: { name, arguments: args },
  }, headers);
  const body = reply.body as { result?: ToolResult; error?: unknown };
  if (reply.status !== 200 || !body.result) {
    throw new Error(
      `tools/call ${name} answered ${reply.status} ${JSON.stringify(body)}`,
    );
  }
  return body.result;
}

/** `Authorization: Bearer <token>`. */
export function bearer(token: string): Record<string, string> {
  return { authorization: `Bearer ${token}` };
}

/** A test HTTP server on 127.0.0.1 that records every request body. */
export interface RecordingServer {
  url: string;
  requests: { headers: Headers; body: string }[];
  close(): Promise<void>;
}

/** Serves `handler` on a random loopback port, recording requests first. */
export function startRecordingServer(
  handler: (request: Request, body: string) => Response | Promise<Response>,
): RecordingServer {
  const requests: RecordingServer["requests"] = [];
  const server = Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    onListen: () => {},
  }, async (request) => {
    const body = await request.text();
    requests.push({ headers: request.headers, body });
    return await handler(request, body);
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    requests,
    close: () => server.shutdown(),
  };
}

/** The request-side assets of {@linkcode sampleSpec} (inline source). */
export function sampleAssets(): RunAssetsRequest {
  const spec = sampleSpec("ignored");
  return {
    event: spec.event,
    grant: {
      history: spec.grant.history,
      knowledge_bases: spec.grant.knowledgeBases,
      tools: spec.grant.tools,
      skills: spec.grant.skills,
    },
    inline: (spec.source as { inline: unknown }).inline,
  } as unknown as RunAssetsRequest;
}

/** The six LangBot asset tools' names, sorted. */
export const ASSET_TOOL_NAMES: readonly string[] = [
  "langbot_call_tool",
  "langbot_get_current_event",
  "langbot_get_tool_detail",
  "langbot_history_page",
  "langbot_list_assets",
  "langbot_retrieve_knowledge",
];

/**
 * Fixture-agent flags: reach the assets MCP server over HTTP, call
 * `langbot_get_current_event`, and record every line to `record`.
 */
export function currentEventCallFlags(record: string): string[] {
  return [
    "--mcp-http",
    "--mcp-call",
    "--mcp-tool",
    "langbot_get_current_event",
    "--record",
    record,
  ];
}
