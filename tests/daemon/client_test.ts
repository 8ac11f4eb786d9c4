/**
 * `runDaemonClient` against real WebSockets on 127.0.0.1: the keep-alive that
 * gives up a silent hub, and events over the 1 MiB frame limit, which arrive
 * split (deltas) or truncated (everything else) instead of being lost.
 */

import assert from "node:assert/strict";
import {
  type DaemonClientOptions,
  type DaemonJob,
  type DaemonLogEntry,
  MAX_RECONNECT_DELAY_MS,
  reconnectDelay,
  runDaemonClient,
} from "../../lib/daemon/client.ts";
import { RunnerError } from "../../lib/errors.ts";
import type { RunEvent } from "../../lib/events.ts";
import { createHub, serveHub } from "../../lib/hub/relay_hub.ts";
import {
  CLOSE_KEEPALIVE_TIMEOUT,
  type JsonObject,
  MAX_FRAME_BYTES,
  REFUSAL_REASONS,
} from "../../lib/relay.ts";
import { encodeEventFrames } from "../../lib/relay/event_fit.ts";
import { fromRelayEvent } from "../../lib/relay/wire_events.ts";
import { startMcpProxy } from "../../lib/mcp_proxy.ts";
import { tempDir } from "../helpers.ts";
import { ScriptedHub, TestSocket } from "../relay_sockets.ts";
import { within } from "../stream_helpers.ts";

const TOKEN = "daemon-client-test-token-8d2f6b1a9e";
const READY =
  '{"type": "daemon.ready", "daemon_id": "quiet", "protocol": "coding-relay-v1"}';
const START_J1 =
  '{"type": "run.start", "job_id": "j1", "payload": {"run_id": "r"}}';

/** The client's options besides where it dials, as whom, and its signal. */
type QuietOptions = Omit<
  DaemonClientOptions,
  "url" | "daemonId" | "token" | "signal"
>;

/**
 * Runs the daemon client as daemon `quiet` (redialling after 10 ms) against a
 * bare hub; `body` gets the hub and the client's abort controller. The
 * client is stopped and awaited, and the hub closed, after.
 */
async function withQuietClient(
  options: QuietOptions,
  body: (hub: ScriptedHub, controller: AbortController) => Promise<void>,
): Promise<void> {
  const hub = new ScriptedHub();
  const controller = new AbortController();
  const client = runDaemonClient({
    url: hub.url,
    daemonId: "quiet",
    token: TOKEN,
    reconnectDelayMs: 10,
    signal: controller.signal,
    ...options,
  });
  try {
    await body(hub, controller);
  } finally {
    controller.abort();
    await client;
    await hub.close();
  }
}

/** The next connection, past its hello and the hub's ready; with `job`, job `j1` is started on it. */
async function acceptReady(
  hub: ScriptedHub,
  job: "start job" | "no job",
): Promise<TestSocket> {
  const side = await hub.accept();
  assert.equal((await side.next()).type, "daemon.hello");
  side.send(READY);
  if (job === "start job") side.send(START_J1);
  return side;
}

Deno.test("keep-alive: a hub that stops answering is closed, its job cancelled and awaited, then redialled", async () => {
  const logs: DaemonLogEntry[] = [];
  let jobSettled = false;
  await withQuietClient({
    pingIntervalMs: 20,
    pingTimeoutMs: 500,
    onLog: (entry) => logs.push(entry),
    runJob: async (job) => {
      await new Promise((resolve) =>
        job.signal.addEventListener("abort", resolve, { once: true })
      );
      jobSettled = true;
      return { cleanupConfirmed: true };
    },
  }, async (hub) => {
    const first = await acceptReady(hub, "start job");
    // From here on the hub never answers.
    assert.deepEqual(await first.next(), { type: "daemon.ping" });
    assert.deepEqual(await first.closed, {
      code: CLOSE_KEEPALIVE_TIMEOUT,
      reason: REFUSAL_REASONS.keepaliveTimeout,
    });
    const second = await hub.accept();
    assert.equal(jobSettled, true, "the job ended before the redial");
    const hello = await second.next();
    assert.deepEqual([hello.type, hello.daemon_id], ["daemon.hello", "quiet"]);
    assert.ok(
      logs.some((entry) =>
        entry.message.includes("no frame from the hub within 500 ms")
      ),
      JSON.stringify(logs),
    );
  });
});

Deno.test("keep-alive: answered pings keep the connection", async () => {
  await withQuietClient({
    // A late pong on a loaded machine must not pass for a dead hub: the
    // timeout is generous, the hundred pings still span two of them.
    pingIntervalMs: 20,
    pingTimeoutMs: 1000,
    runJob: () => Promise.resolve({ cleanupConfirmed: true }),
  }, async (hub, controller) => {
    const side = await acceptReady(hub, "no job");
    // A hundred pings span at least two ping timeouts.
    for (let count = 0; count < 100; count++) {
      assert.deepEqual(await side.next(), { type: "daemon.ping" });
      side.send('{"type": "daemon.pong"}');
    }
    assert.equal(side.ws.readyState, WebSocket.OPEN);
    controller.abort();
    assert.equal((await side.closed).code, 1000);
  });
});

Deno.test("keep-alive: a hub that answers no ping while it works on a tool call is not given up", async () => {
  await withQuietClient({
    pingIntervalMs: 20,
    pingTimeoutMs: 300,
    runJob: async (job) => {
      const answer = await job.mcp({
        jsonrpc: "2.0",
        id: 1,
        method: "tools/call",
        params: { name: "slow_tool" },
      });
      job.emit({
        type: "run.completed",
        data: { finish_reason: "stop", answer },
      });
      return { cleanupConfirmed: true };
    },
  }, async (hub) => {
    const side = await acceptReady(hub, "start job");
    // `next` throws once the daemon closed the connection.
    const request = await side.next();
    assert.equal(request.type, "mcp.request");
    // Like the Python hub, which runs the tool inside its reader loop: no
    // frame at all while the tool works. 30 pings 20 ms apart span
    // almost two ping timeouts after the first one.
    for (let pings = 0; pings < 30; pings++) {
      assert.deepEqual(await side.next(), { type: "daemon.ping" });
    }
    side.send(
      `{"type": "mcp.response", "request_id": "${request.request_id}", "job_id": "j1", "payload": {"jsonrpc": "2.0", "id": 1, "result": {"content": []}}}`,
    );
    let frame = await side.next();
    while (frame.type === "daemon.ping") frame = await side.next();
    assert.deepEqual(frame, {
      type: "run.event",
      job_id: "j1",
      event: {
        type: "run.completed",
        data: {
          finish_reason: "stop",
          answer: { jsonrpc: "2.0", id: 1, result: { content: [] } },
        },
      },
    });
    assert.equal(side.ws.readyState, WebSocket.OPEN);
  });
});

Deno.test("keep-alive: a hub that never answers a tool call is given up once the MCP timeout passed", async () => {
  let mcpFailure: unknown;
  await withQuietClient({
    pingIntervalMs: 20,
    pingTimeoutMs: 300,
    mcpTimeoutMs: 200,
    runJob: async (job) => {
      await job.mcp({ jsonrpc: "2.0", id: 1, method: "tools/call" }).catch(
        (error) => mcpFailure = error,
      );
      if (!job.signal.aborted) {
        await new Promise((resolve) =>
          job.signal.addEventListener("abort", resolve, { once: true })
        );
      }
      return { cleanupConfirmed: true };
    },
  }, async (hub) => {
    const side = await acceptReady(hub, "start job");
    assert.deepEqual(await side.closed, {
      code: CLOSE_KEEPALIVE_TIMEOUT,
      reason: REFUSAL_REASONS.keepaliveTimeout,
    });
    assert.equal((mcpFailure as { code?: string })?.code, "relay.mcp_failed");
    assert.match(String((mcpFailure as Error).message), /within 200 ms/);
  });
});

function bytesOf(text: string): number {
  return new TextEncoder().encode(text).length;
}

Deno.test("a 3 MiB answer crosses the hub: every delta (split), a truncated message.completed, one run.completed", async () => {
  const stateDir = tempDir();
  const hub = createHub({ token: TOKEN, stateDir });
  const server = serveHub({ hub });
  const controller = new AbortController();
  const piece = 'é✓ab"\\\n'.repeat(70_000); // ~1 MiB of JSON per piece
  const answer = piece + piece + piece;
  const emitAnswer = (job: DaemonJob) => {
    let sent = "";
    for (const [index, content] of [piece, piece, piece].entries()) {
      sent += content;
      job.emit({
        type: "message.delta",
        data: {
          chunk: {
            role: "assistant",
            content,
            all_content: sent,
            msg_sequence: index + 1,
          },
        },
      });
    }
    const message = { role: "assistant", content: answer };
    job.emit({ type: "message.completed", data: { message } });
    job.emit({
      type: "run.completed",
      data: { finish_reason: "end_turn", message },
    });
    return Promise.resolve({ cleanupConfirmed: true });
  };
  const client = runDaemonClient({
    url: server.url,
    daemonId: "big",
    token: TOKEN,
    signal: controller.signal,
    runJob: emitAnswer,
  });
  try {
    const events: RunEvent[] = [];
    const { outcome } = await hub.runJob({
      daemonId: "big",
      runId: "run-big",
      payload: { prompt_text: "write a lot" },
      onEvent: (event, runner) => events.push(fromRelayEvent(event, runner)),
      connectTimeoutMs: 5000,
    });
    assert.equal(outcome, "finished");
    const deltas = events.filter((event) => event.type === "message.delta");
    assert.ok(deltas.length > 3, "deltas were split");
    assert.equal(
      deltas.map((event) => (event.data.chunk as JsonObject).content).join(""),
      answer,
      "every delta arrived",
    );
    const completed = events.filter((event) =>
      event.type === "message.completed"
    );
    assert.equal(completed.length, 1);
    const message = completed[0].data.message as JsonObject;
    assert.equal(
      completed[0].data.truncated,
      true,
      "the runner details say so",
    );
    assert.equal(message.role, "assistant");
    const content = String(message.content);
    assert.ok(content.length > 0 && answer.startsWith(content), "a prefix");
    assert.ok(content.length < answer.length, "cut");
    const terminal = events.filter((event) =>
      event.type === "run.completed" || event.type === "run.failed"
    );
    assert.equal(
      terminal.length,
      1,
      JSON.stringify(terminal.map((e) => e.type)),
    );
    assert.equal(terminal[0].type, "run.completed");
    assert.equal(events.at(-1), terminal[0]);
    assert.equal(terminal[0].data.finish_reason, "end_turn");
    assert.equal(terminal[0].data.truncated, true);
  } finally {
    controller.abort();
    await client;
    await hub.close();
    await server.close();
    await Deno.remove(stateDir, { recursive: true });
  }
});

Deno.test("codec: an oversized event loses only the largest strings, each marked truncated", () => {
  const big = "x".repeat(MAX_FRAME_BYTES);
  const event = {
    type: "tool.call.completed",
    data: {
      tool_call_id: "call-1",
      tool_name: "read_file",
      result: [
        { type: "text", text: big },
        { type: "text", text: "small" },
        { type: "text", text: big },
      ],
    },
  };
  const frames = encodeEventFrames("job", event);
  assert.equal(frames.length, 1);
  assert.ok(bytesOf(frames[0]) <= MAX_FRAME_BYTES);
  const { data } = JSON.parse(frames[0]).event;
  assert.equal(data.tool_call_id, "call-1");
  assert.equal(data.tool_name, "read_file");
  assert.equal(data.truncated, undefined, "only the cut fields' objects");
  assert.deepEqual(data.result[1], { type: "text", text: "small" });
  const cut = [data.result[0], data.result[2]];
  assert.ok(cut.every((item) => item.truncated === true));
  assert.ok(
    cut.every((item) => big.startsWith(item.text)),
    "prefixes of the original",
  );
  assert.ok(
    bytesOf(frames[0]) > MAX_FRAME_BYTES - 1024,
    "no more cut than needed",
  );

  const failed = encodeEventFrames("job", {
    type: "run.failed",
    data: { error: big + big, code: "acp.process_exited", retryable: false },
  });
  const failedFrame = JSON.parse(failed[0]);
  const failure = failedFrame.event.data;
  assert.deepEqual(
    [failure.code, failure.retryable, failure.truncated],
    ["acp.process_exited", false, undefined],
  );
  assert.equal(
    failedFrame.runner.data.truncated,
    true,
    "the flag rides beside LangBot's closed payload",
  );

  const numbers = Array.from({ length: 300_000 }, (_, index) => index);
  const opaque = JSON.parse(
    encodeEventFrames("job", {
      type: "state.updated",
      data: { key: "k", scope: "conversation", value: { numbers } },
    })[0],
  );
  assert.deepEqual(opaque.event.data, {
    key: "k",
    scope: "conversation",
    value: null,
  });
  assert.deepEqual(opaque.runner, { data: { truncated: true } });
});

Deno.test("reconnect back-off: the base after a ready connection, doubling per failed attempt up to 60 s, plus at most 20% jitter", () => {
  const none = () => 0;
  const most = () => 0.999999;
  assert.deepEqual(
    Array.from(
      { length: 9 },
      (_, failures) => reconnectDelay(5000, failures, none),
    ),
    [5000, 10000, 20000, 40000, 60000, 60000, 60000, 60000, 60000],
  );
  assert.equal(reconnectDelay(5000, 10_000, none), MAX_RECONNECT_DELAY_MS);
  for (let failures = 0; failures < 9; failures++) {
    const plain = reconnectDelay(5000, failures, none);
    const jittered = reconnectDelay(5000, failures, most);
    assert.ok(jittered > plain && jittered < plain * 1.2, `${failures}`);
  }
  assert.equal(reconnectDelay(90_000, 3, none), 90_000, "a longer base wins");
  assert.equal(reconnectDelay(100, 2, none), 400, "a test's short base");
});

Deno.test("an MCP request the hub never answers fails with relay.mcp_failed: on timeout, and when the connection drops", async (t) => {
  const post = (url: string) =>
    fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: '{"jsonrpc": "2.0", "id": 5, "method": "tools/list"}',
    });
  const cases = [
    { name: "no answer within the timeout", timeoutMs: 100, drop: false },
    { name: "the connection drops first", timeoutMs: 60_000, drop: true },
  ];
  for (const { name, timeoutMs, drop } of cases) {
    await t.step(name, async () => {
      const failure = Promise.withResolvers<unknown>();
      const proxied = Promise.withResolvers<string>();
      await withQuietClient({
        mcpTimeoutMs: timeoutMs,
        runJob: async (job) => {
          const proxy = startMcpProxy({ forward: job.mcp });
          try {
            const asked = post(proxy.url).then((answer) => answer.text());
            await job.mcp({ jsonrpc: "2.0", id: 1, method: "tools/list" })
              .then(failure.resolve, failure.resolve);
            proxied.resolve(await asked);
          } finally {
            await proxy.close();
          }
          return { cleanupConfirmed: true };
        },
      }, async (hub) => {
        const side = await acceptReady(hub, "start job");
        const requests = [await side.next(), await side.next()];
        assert.deepEqual(requests.map((frame) => frame.type), [
          "mcp.request",
          "mcp.request",
        ]);
        if (drop) side.ws.close(1001);
        // A safety net: a request nobody fails would otherwise hang the suite.
        const error = await within(failure.promise, "relay.mcp_failed");
        assert.ok(error instanceof RunnerError, String(error));
        assert.equal(error.code, "relay.mcp_failed");
        assert.equal(error.retryable, true);
        const expected = drop
          ? "the hub connection closed before the MCP answer came"
          : "the hub did not answer the MCP request within 100 ms";
        assert.equal(error.message, expected);
        // What the agent sees through the daemon's MCP endpoint.
        assert.deepEqual(JSON.parse(await proxied.promise), {
          jsonrpc: "2.0",
          id: 5,
          error: { code: -32000, message: expected },
        });
      });
    });
  }
});
