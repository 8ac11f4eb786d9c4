/**
 * `/acp` and a client that stops reading: a Streamable HTTP client that
 * prompts an agent with a lot to say and never opens its session's stream.
 * What the runner holds for it is bounded (`--acp-max-buffered-mb`, the
 * SDK's buffer and the runner's own queue alike): the run goes on and ends,
 * other clients are served, no agent process outlives the run, and when the
 * client comes back it gets the turn's first updates and an answer that says
 * how many were dropped for it.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { agentText, initialize, openAcpClient } from "../acp_client_helpers.ts";
import { assertAgentGone } from "../helpers.ts";
import {
  agentCommand,
  apiFetch,
  readSse,
  startServe,
  streamUntil,
  tempDir,
} from "../serve_test_helpers.ts";

const API_TOKEN = "acp-slow-client-api-Qe4Rt7Yu1Io9Pa3Sd6Fg";
const CHUNKS = 256;

/** A raw Streamable HTTP client: only what the test reads is read. */
function rawClient(url: string) {
  let connectionId = "";
  const headers = (extra: Record<string, string> = {}) => ({
    authorization: `Bearer ${API_TOKEN}`,
    ...(connectionId ? { "acp-connection-id": connectionId } : {}),
    ...extra,
  });
  return {
    async initialize(): Promise<void> {
      const response = await fetch(`${url}/acp`, {
        method: "POST",
        headers: headers({ "content-type": "application/json" }),
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 1,
          method: "initialize",
          params: { protocolVersion: 1, clientCapabilities: {} },
        }),
      });
      assert.equal(response.status, 200, await response.clone().text());
      await response.body?.cancel();
      connectionId = response.headers.get("acp-connection-id")!;
    },
    async post(
      message: Record<string, unknown>,
      sessionId?: string,
    ): Promise<void> {
      const response = await fetch(`${url}/acp`, {
        method: "POST",
        headers: headers({
          "content-type": "application/json",
          ...(sessionId ? { "acp-session-id": sessionId } : {}),
        }),
        body: JSON.stringify({ jsonrpc: "2.0", ...message }),
      });
      assert.equal(response.status, 202, await response.text());
    },
    /** Opens the connection's stream (no session) or a session's. */
    async stream(sessionId?: string): Promise<Response> {
      const response = await fetch(`${url}/acp`, {
        headers: headers({
          accept: "text/event-stream",
          ...(sessionId ? { "acp-session-id": sessionId } : {}),
        }),
      });
      if (response.status !== 200) {
        assert.fail(`GET /acp: ${response.status} ${await response.text()}`);
      }
      return response;
    },
  };
}

/** A JSON-RPC answer as the test reads it. */
interface JsonRpcAnswer {
  id: number;
  result: {
    sessionId: string;
    stopReason: string;
    _meta: { runner: { updates_dropped?: number } };
  };
}

/** Reads JSON-RPC messages off an SSE stream until the answer to `id`. */
async function readUntilAnswer(
  response: Response,
  id: number,
): Promise<{ before: Record<string, unknown>[]; answer: JsonRpcAnswer }> {
  const before: Record<string, unknown>[] = [];
  for await (const message of readSse(response.body!)) {
    if (!message.data) continue;
    const parsed = JSON.parse(message.data);
    if (parsed.id === id) {
      await response.body?.cancel().catch(() => {});
      return { before, answer: parsed };
    }
    before.push(parsed);
  }
  throw new Error(`the stream ended before the answer to ${id}`);
}

Deno.test("acp http: a client that stops reading holds bounded output; the run ends, others are served, and it is told what was dropped", async () => {
  const dir = await tempDir();
  const workspace = await Deno.makeTempDir({ dir, prefix: "ws-" });
  const pidFile = join(dir, "agent-pids.json");
  const serve = await startServe({
    dataDir: dir,
    args: [
      "--api-token",
      API_TOKEN,
      "--provider",
      "custom",
      "--workspace",
      workspace,
      "--acp-max-buffered-mb",
      "1",
      // No warm agent between runs: the run's end is its agent's.
      "--agent-idle-timeout",
      "0",
      "--acp-command",
      // 4 MiB of reply, numbered chunks of 16 KiB.
      agentCommand([
        "--text-kb",
        "4096",
        "--chunks",
        String(CHUNKS),
        "--grandchild",
        "--pid-file",
        pidFile,
      ]),
    ],
  });
  const other = openAcpClient({
    url: serve.url,
    token: API_TOKEN,
    profile: "http",
  });
  try {
    const stalled = rawClient(serve.url);
    await stalled.initialize();
    const connectionStream = await stalled.stream();
    await stalled.post({
      id: 2,
      method: "session/new",
      params: { cwd: "/on/the/editor", mcpServers: [] },
    });
    const created = await readUntilAnswer(connectionStream, 2);
    const sessionId = created.answer.result.sessionId;
    await stalled.post({
      id: 3,
      method: "session/prompt",
      params: { sessionId, prompt: [{ type: "text", text: "say a lot" }] },
    }, sessionId);
    // Its session stream is never opened while the agent talks.

    const started = await serve.waitForLog((entry) =>
      entry.msg === "run started" && entry.conversation_id === sessionId
    );
    const runId = String(started.run_id);
    await streamUntil(
      await apiFetch(`${serve.url}/v1/runs/${runId}/events`),
      "run.completed",
    );
    assertAgentGone(pidFile);
    assert.ok(
      serve.logs().includes(
        "acp client not reading: the rest of the turn's updates are dropped for it",
      ),
      "the operator's log says a client fell behind",
    );

    // Another client is served while the first still holds its backlog.
    await initialize(other);
    const { sessionId: otherSession } = await other.agent.request(
      "session/new",
      { cwd: "/elsewhere", mcpServers: [] },
    );
    const otherAnswer = await other.agent.request("session/prompt", {
      sessionId: otherSession,
      prompt: [{ type: "text", text: "me too" }],
    });
    assert.equal(otherAnswer.stopReason, "end_turn");
    const otherChunks = agentText(other.updates, otherSession).match(
      /\d{6}x+/g,
    );
    assert.equal(otherChunks?.length, CHUNKS, "a reading client gets it all");

    // The stalled client comes back: the turn's first updates, in order, then the answer.
    const { before, answer } = await readUntilAnswer(
      await stalled.stream(sessionId),
      3,
    );
    assert.equal(answer.result.stopReason, "end_turn");
    const dropped = answer.result._meta.runner.updates_dropped ?? 0;
    assert.ok(dropped > 0, "the answer counts the updates dropped");
    const received = before
      .filter((message) => message.method === "session/update")
      .map((message) =>
        (message.params as { update: { content?: { text?: string } } })
          .update.content?.text ?? ""
      )
      .join("").match(/\d{6}x+/g) ?? [];
    assert.ok(received.length > 0, "the turn's first updates arrive");
    assert.ok(received.length < CHUNKS, "not the whole turn");
    assert.deepEqual(
      received.map((text) => Number(text.slice(0, 6))),
      received.map((_, index) => index),
      "a prefix of the turn, without holes",
    );
    const heldBytes = received.reduce((sum, text) => sum + text.length, 0);
    assert.ok(
      heldBytes <= 2 * 1024 * 1024 + 16 * 1024,
      `held ${heldBytes} bytes: at most the SDK's buffer and the runner's queue`,
    );
    const run = await (await apiFetch(`${serve.url}/v1/runs/${runId}`))
      .json();
    assert.equal(
      run.status,
      "completed",
      "the run does not wait for the client",
    );
  } finally {
    other.close();
    await serve.stop();
  }
});
