/**
 * `/acp` and a client that stops reading, over each profile: a Streamable
 * HTTP client that prompts an agent with a lot to say and never opens its
 * session's stream, and a WebSocket client that stops reading its socket.
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
import { clientFrame, upgraded, writeAll } from "../raw_tcp_helpers.ts";
import {
  agentCommand,
  apiFetch,
  readSse,
  type ServeProcess,
  startServe,
  streamUntil,
  tempDir,
} from "../serve_test_helpers.ts";

const API_TOKEN = "acp-slow-client-api-Qe4Rt7Yu1Io9Pa3Sd6Fg";
const CHUNKS = 256;
const MIB = 1024 * 1024;

/**
 * What the kernel holds of a socket nobody reads: the sender's buffer grows
 * to at most `tcp_wmem`'s largest; the receiver's follows what its
 * application reads, so it stays at `tcp_rmem`'s default.
 */
function kernelSocketBytes(): number {
  const field = (name: string, index: number) =>
    Number(
      Deno.readTextFileSync(`/proc/sys/net/ipv4/${name}`).trim().split(/\s+/)[
        index
      ],
    );
  return field("tcp_wmem", 2) + field("tcp_rmem", 1);
}

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

/** A server whose agent answers every prompt with `textKb` KiB in {@linkcode CHUNKS} numbered chunks. */
async function startTalkativeServe(
  textKb: number,
): Promise<{ serve: ServeProcess; pidFile: string }> {
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
      agentCommand([
        "--text-kb",
        String(textKb),
        "--chunks",
        String(CHUNKS),
        "--grandchild",
        "--pid-file",
        pidFile,
      ]),
    ],
  });
  return { serve, pidFile };
}

/**
 * Waits for the run of `sessionId`'s prompt to complete while its client
 * reads nothing; checks its agent is gone and the operator was told. The
 * run's id.
 */
async function runEndsWithoutTheClient(
  serve: ServeProcess,
  { sessionId, pidFile }: { sessionId: string; pidFile: string },
): Promise<string> {
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
  return runId;
}

/**
 * What a client that fell behind gets when it reads again: the turn's first
 * updates (a prefix of the reply's numbered chunks, without holes), then an
 * answer that counts the rest as dropped. The text bytes received.
 */
function assertFirstUpdatesThenAnswer(
  before: Record<string, unknown>[],
  answer: JsonRpcAnswer,
): number {
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
  assert.equal(
    received.length + dropped,
    CHUNKS,
    "each update sent or counted",
  );
  return received.reduce((sum, text) => sum + text.length, 0);
}

/** Asserts `runId` completed (it did not wait for its client). */
async function assertRunCompleted(
  serve: ServeProcess,
  runId: string,
): Promise<void> {
  const run = await (await apiFetch(`${serve.url}/v1/runs/${runId}`)).json();
  assert.equal(run.status, "completed", "the run does not wait for the client");
}

Deno.test("acp http: a client that stops reading holds bounded output; the run ends, others are served, and it is told what was dropped", async () => {
  // 4 MiB of reply, numbered chunks of 16 KiB.
  const { serve, pidFile } = await startTalkativeServe(4096);
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
    const runId = await runEndsWithoutTheClient(serve, { sessionId, pidFile });

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
    const heldBytes = assertFirstUpdatesThenAnswer(before, answer);
    assert.ok(
      heldBytes <= 2 * MIB + 16 * 1024,
      `held ${heldBytes} bytes: at most the SDK's buffer and the runner's queue`,
    );
    await assertRunCompleted(serve, runId);
  } finally {
    other.close();
    await serve.stop();
  }
});

/** A raw WebSocket client of `/acp`: it reads its socket only when told to. */
async function rawWebSocketClient(url: string) {
  const conn = await upgraded(url, {
    path: "/acp",
    headers: { authorization: `Bearer ${API_TOKEN}` },
  });
  let buffered = new Uint8Array();
  const chunk = new Uint8Array(64 * 1024);
  /** The next frame's opcode and payload; undefined once the socket closed. */
  async function nextFrame(): Promise<
    { opcode: number; payload: Uint8Array } | undefined
  > {
    for (;;) {
      const frame = parseServerFrame(buffered);
      if (frame) {
        buffered = buffered.slice(frame.size);
        return frame;
      }
      const read = await conn.read(chunk).catch(() => null);
      if (read === null) return undefined;
      const next = new Uint8Array(buffered.length + read);
      next.set(buffered);
      next.set(chunk.subarray(0, read), buffered.length);
      buffered = next;
    }
  }
  return {
    send(message: Record<string, unknown>): Promise<void> {
      const text = JSON.stringify({ jsonrpc: "2.0", ...message });
      return writeAll(conn, clientFrame(0x81, new TextEncoder().encode(text)));
    },
    /** Reads messages until the answer to `id`. */
    async readUntilAnswer(
      id: number,
    ): Promise<{ before: Record<string, unknown>[]; answer: JsonRpcAnswer }> {
      const before: Record<string, unknown>[] = [];
      for (;;) {
        const frame = await nextFrame();
        if (!frame) {
          throw new Error(`the socket closed before the answer to ${id}`);
        }
        if (frame.opcode !== 0x1) continue;
        const parsed = JSON.parse(new TextDecoder().decode(frame.payload));
        if (parsed.id === id) return { before, answer: parsed };
        before.push(parsed);
      }
    },
    close: () => conn.close(),
  };
}

/** The unmasked server frame at the start of `bytes` and its size; undefined until complete. */
function parseServerFrame(
  bytes: Uint8Array,
): { opcode: number; payload: Uint8Array; size: number } | undefined {
  if (bytes.length < 2) return undefined;
  let length = bytes[1] & 0x7f;
  let offset = 2;
  if (length === 126) {
    if (bytes.length < 4) return undefined;
    length = (bytes[2] << 8) | bytes[3];
    offset = 4;
  } else if (length === 127) {
    if (bytes.length < 10) return undefined;
    length = new DataView(bytes.buffer, bytes.byteOffset + 6, 4).getUint32(0);
    offset = 10;
  }
  if (bytes.length < offset + length) return undefined;
  return {
    opcode: bytes[0] & 0x0f,
    payload: bytes.slice(offset, offset + length),
    size: offset + length,
  };
}

Deno.test("acp websocket: a client that stops reading its socket holds bounded output; the run ends and it is told what was dropped", async () => {
  // Held at most: the SDK's buffer and the runner's queue (1 MiB each), the
  // sockets, and a chunk in flight. The reply is well past that.
  const bound = 2 * MIB + kernelSocketBytes() + 64 * 1024;
  const replyKb = Math.max(16 * 1024, Math.ceil((2 * bound) / 1024));
  const { serve, pidFile } = await startTalkativeServe(replyKb);
  const stalled = await rawWebSocketClient(serve.url);
  try {
    await stalled.send({
      id: 1,
      method: "initialize",
      params: { protocolVersion: 1, clientCapabilities: {} },
    });
    await stalled.readUntilAnswer(1);
    await stalled.send({
      id: 2,
      method: "session/new",
      params: { cwd: "/on/the/editor", mcpServers: [] },
    });
    const { answer: created } = await stalled.readUntilAnswer(2);
    const sessionId = created.result.sessionId;
    await stalled.send({
      id: 3,
      method: "session/prompt",
      params: { sessionId, prompt: [{ type: "text", text: "say a lot" }] },
    });
    // Its socket is not read while the agent talks.
    const runId = await runEndsWithoutTheClient(serve, { sessionId, pidFile });

    const { before, answer } = await stalled.readUntilAnswer(3);
    const heldBytes = assertFirstUpdatesThenAnswer(before, answer);
    assert.ok(
      heldBytes <= bound,
      `held ${heldBytes} bytes: at most the SDK's buffer, the runner's queue and the sockets (${bound})`,
    );
    await assertRunCompleted(serve, runId);
  } finally {
    stalled.close();
    await serve.stop();
  }
});
