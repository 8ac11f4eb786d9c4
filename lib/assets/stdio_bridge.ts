/**
 * `runner mcp-stdio`: an MCP server on stdio that forwards every JSON-RPC
 * message to an MCP-over-HTTP endpoint. The runner gives it to agents that do
 * not advertise MCP over HTTP, so they still reach the run's LangBot assets
 * (every ACP agent supports stdio MCP servers). URL and token come from the
 * environment (`RUNNER_MCP_URL`, `RUNNER_MCP_TOKEN`), never the command line.
 *
 * @module
 */

import { fileURLToPath } from "node:url";
import { DENO_RUN_FLAGS } from "../runtime_permissions.ts";

/** Options for {@linkcode runMcpStdioBridge}. */
export interface McpStdioBridgeOptions {
  /** The MCP HTTP endpoint. */
  url: string;
  /** Bearer token for it. */
  token?: string;
  /** JSON-RPC lines in (default stdin). */
  input?: ReadableStream<Uint8Array>;
  /** JSON-RPC lines out (default stdout). */
  output?: WritableStream<Uint8Array>;
}

/** Forwards NDJSON JSON-RPC from `input` to the endpoint until `input` ends. */
export async function runMcpStdioBridge(
  options: McpStdioBridgeOptions,
): Promise<void> {
  const input = options.input ?? Deno.stdin.readable;
  const writer = (options.output ?? Deno.stdout.writable).getWriter();
  const encoder = new TextEncoder();
  const pending = new Set<Promise<void>>();
  let buffered = "";
  const forward = async (line: string) => {
    const answer = await post(options, line);
    if (answer !== undefined) {
      await writer.write(encoder.encode(JSON.stringify(answer) + "\n"));
    }
  };
  for await (const chunk of input.pipeThrough(new TextDecoderStream())) {
    buffered += chunk;
    let newline: number;
    while ((newline = buffered.indexOf("\n")) >= 0) {
      const line = buffered.slice(0, newline).trim();
      buffered = buffered.slice(newline + 1);
      if (!line) continue;
      const task = forward(line).finally(() => pending.delete(task));
      pending.add(task);
    }
  }
  await Promise.all(pending);
  await writer.close().catch(() => {});
}

async function post(
  options: McpStdioBridgeOptions,
  line: string,
): Promise<unknown> {
  let id: unknown = null;
  try {
    id = (JSON.parse(line) as { id?: unknown }).id ?? null;
  } catch {
    return rpcError(null, -32700, "Parse error");
  }
  try {
    const response = await fetch(options.url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        ...(options.token ? { authorization: `Bearer ${options.token}` } : {}),
      },
      body: line,
    });
    const text = await response.text();
    if (response.status === 202 || !text.trim()) return undefined;
    if (!response.ok && !text.trim().startsWith("{")) {
      return rpcError(
        id,
        -32603,
        `MCP endpoint answered HTTP ${response.status}`,
      );
    }
    const data = (response.headers.get("content-type") ?? "").includes(
        "text/event-stream",
      )
      ? text.split(/\r?\n/).filter((l) => l.startsWith("data:")).map((l) =>
        l.slice(5).trim()
      ).join("")
      : text;
    return JSON.parse(data);
  } catch (error) {
    return rpcError(
      id,
      -32603,
      `MCP endpoint unreachable: ${
        error instanceof Error ? error.message : error
      }`,
    );
  }
}

function rpcError(id: unknown, code: number, message: string): unknown {
  return id === undefined
    ? undefined
    : { jsonrpc: "2.0", id, error: { code, message } };
}

/** The argv that starts this runner again (the compiled binary, or `deno run` of main.ts). */
export function selfCommand(): string[] {
  const exe = Deno.execPath();
  const underDeno = /(^|[\\/])deno(\.exe)?$/.test(exe);
  return underDeno
    ? [
      exe,
      "run",
      ...DENO_RUN_FLAGS,
      fileURLToPath(new URL("../../main.ts", import.meta.url)),
    ]
    : [exe];
}

/** Runs `runner mcp-stdio`; returns the exit code. */
export async function mcpStdioCommand(args: string[]): Promise<number> {
  if (args.includes("--help") || args.includes("-h")) {
    console.log(
      "Usage: runner mcp-stdio\n\n(internal) An MCP stdio server that forwards to RUNNER_MCP_URL with RUNNER_MCP_TOKEN;\nthe runner gives it to agents without MCP over HTTP.",
    );
    return 0;
  }
  const url = Deno.env.get("RUNNER_MCP_URL");
  if (!url) {
    console.error("runner mcp-stdio: RUNNER_MCP_URL is not set.");
    return 2;
  }
  await runMcpStdioBridge({ url, token: Deno.env.get("RUNNER_MCP_TOKEN") });
  return 0;
}
