/**
 * The `/acp` stream bench's client: the ACP SDK's own client
 * (`acp.client()`), reading one prompt's answer either from an agent it
 * spawns (its stdio: the baseline) or from `runner serve`'s `/acp` over
 * Streamable HTTP or WebSocket. It sends `initialize`, `session/new` and one
 * `session/prompt`, counts the answer's text, and writes
 * `{"first_update_ms", "chunks", "text_bytes"}` to the file named by
 * `BENCH_ACP_RESULT` (or stdout), the first update's time
 * counted from before `initialize` (so a runner that starts its agent at
 * the prompt pays for that start, as the baseline pays for its spawn).
 *
 * ```sh
 * deno run -A scripts/bench_acp_client.ts stdio deno run scripts/bench_agent.ts --chunks 1000
 * deno run -A scripts/bench_acp_client.ts http http://127.0.0.1:8080/acp TOKEN
 * ```
 *
 * @module
 */

import * as acp from "@agentclientprotocol/sdk";
import { createHttpStream } from "@agentclientprotocol/sdk/experimental/http-client";
import { createWebSocketStream } from "@agentclientprotocol/sdk/experimental/ws-client";

/** Deno's WebSocket with the header argument the SDK's client passes. */
class HeaderWebSocket extends WebSocket {
  constructor(
    url: string,
    protocols?: string | string[],
    options?: { headers?: Record<string, string> },
  ) {
    // @ts-ignore: Deno's WebSocket takes `{protocols, headers}`.
    super(url, { protocols, headers: options?.headers });
  }
}

/** The stream to the agent and what ends it. */
function open(
  [profile, ...rest]: string[],
): { stream: acp.Stream; end: () => Promise<void> } {
  if (profile === "stdio") {
    const [command, ...args] = rest;
    const child = new Deno.Command(command, {
      args,
      stdin: "piped",
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    return {
      stream: acp.ndJsonStream(child.stdin, child.stdout),
      end: async () => {
        try {
          child.kill("SIGTERM");
        } catch { /* gone */ }
        await child.status;
      },
    };
  }
  const [url, token] = rest;
  const headers = { authorization: `Bearer ${token}` };
  const stream = profile === "http"
    ? createHttpStream(url, { headers })
    : createWebSocketStream(url.replace(/^http/, "ws"), {
      headers,
      WebSocket: HeaderWebSocket,
    });
  return { stream, end: () => Promise.resolve() };
}

const started = performance.now();
let firstUpdateMs: number | undefined;
let chunks = 0;
let textBytes = 0;
const { stream, end } = open(Deno.args);
const connection = acp.client({ name: "runner-bench" })
  .onNotification("session/update", ({ params }) => {
    const update = params.update;
    if (
      update.sessionUpdate === "agent_message_chunk" &&
      update.content.type === "text"
    ) {
      firstUpdateMs ??= performance.now() - started;
      chunks++;
      textBytes += update.content.text.length;
    }
  })
  .connect(stream);
const { agent } = connection;
await agent.request("initialize", {
  protocolVersion: acp.PROTOCOL_VERSION,
  clientCapabilities: {},
});
const { sessionId } = await agent.request("session/new", {
  cwd: Deno.cwd(),
  mcpServers: [],
});
await agent.request("session/prompt", {
  sessionId,
  prompt: [{ type: "text", text: "bench" }],
});
const result = JSON.stringify({
  first_update_ms: firstUpdateMs,
  chunks,
  text_bytes: textBytes,
});
const resultFile = Deno.env.get("BENCH_ACP_RESULT");
if (resultFile) Deno.writeTextFileSync(resultFile, result);
else console.log(result);
connection.close();
await end();
Deno.exit(0);
