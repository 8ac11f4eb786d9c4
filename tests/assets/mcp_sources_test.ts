import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { createHmac, timingSafeEqual } from "node:crypto";
import { Hono } from "hono";
import {
  startAssetGateway,
  startEphemeralBridge,
} from "../../lib/assets/bridge.ts";
import {
  createCallbackSource,
  signCallbackBody,
  verifyCallbackSignature,
} from "../../lib/assets/mcp/sources.ts";
import {
  bearer,
  callTool,
  sampleSpec,
  startRecordingServer,
} from "../assets_test_helpers.ts";

interface UpstreamCall {
  name: string;
  arguments: Record<string, unknown>;
  authorization: string | null;
  session: string | null;
}

/** A minimal MCP server (Hono) that wants a bearer token and a session. */
function startUpstream() {
  const calls: UpstreamCall[] = [];
  const app = new Hono();
  app.post("/mcp", async (c) => {
    if (c.req.header("authorization") !== "Bearer upstream-secret") {
      return c.json({}, 401);
    }
    const message = await c.req.json();
    if (message.method === "initialize") {
      c.header("Mcp-Session-Id", "session-1");
      return c.json({
        jsonrpc: "2.0",
        id: message.id,
        result: {
          protocolVersion: "2025-06-18",
          capabilities: { tools: {} },
          serverInfo: { name: "up", version: "1" },
        },
      });
    }
    if (message.id === undefined) return c.body(null, 202);
    if (c.req.header("mcp-session-id") !== "session-1") return c.json({}, 400);
    const { name, arguments: args } = message.params;
    calls.push({
      name,
      arguments: args,
      authorization: c.req.header("authorization") ?? null,
      session: c.req.header("mcp-session-id") ?? null,
    });
    if (args?.tool_name === "fail") {
      return c.json({
        jsonrpc: "2.0",
        id: message.id,
        error: { code: -32000, message: "tool exploded" },
      });
    }
    const result = {
      content: [{ type: "text", text: JSON.stringify({ upstream: name }) }],
      structuredContent: { upstream: name },
    };
    const reply = JSON.stringify({ jsonrpc: "2.0", id: message.id, result });
    if (name === "langbot_call_tool") {
      return c.body(`event: message\ndata: ${reply}\n\n`, 200, {
        "content-type": "text/event-stream",
      });
    }
    return c.body(reply, 200, { "content-type": "application/json" });
  });
  const server = Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    onListen: () => {},
  }, app.fetch);
  return {
    url: `http://127.0.0.1:${server.addr.port}/mcp`,
    calls,
    close: () => server.shutdown(),
  };
}

/**
 * Asserts the tool call `called` failed with `assets.source_failed` and a
 * message matching `reason`; returns that message.
 */
async function assertSourceFailed(
  called: ReturnType<typeof callTool>,
  reason: RegExp,
): Promise<string> {
  const result = await called;
  assert.equal(result.isError, true);
  const text = result.content[0].text;
  assert.match(text, /^assets\.source_failed: /);
  assert.match(text, reason);
  return text;
}

Deno.test("upstream source: forwards granted calls with the upstream headers, never others", async () => {
  const upstream = startUpstream();
  const spec = sampleSpec("run-a", {
    upstream: {
      url: upstream.url,
      headers: { Authorization: "Bearer upstream-secret" },
    },
  });
  spec.grant.tools!.push({ tool_name: "fail", operations: ["call"] });
  const bridge = await startEphemeralBridge(spec);
  try {
    const auth = bearer(bridge.token);
    const called = await callTool(bridge.url, "langbot_call_tool", {
      tool_name: "weather",
      parameters: { city: "Oslo" },
    }, auth);
    assert.deepEqual(called.structuredContent, {
      upstream: "langbot_call_tool",
    });
    const history = await callTool(bridge.url, "langbot_history_page", {
      limit: 7,
    }, auth);
    assert.deepEqual(history.structuredContent, {
      upstream: "langbot_history_page",
    });
    assert.deepEqual(upstream.calls, [
      {
        name: "langbot_call_tool",
        arguments: { tool_name: "weather", parameters: { city: "Oslo" } },
        authorization: "Bearer upstream-secret",
        session: "session-1",
      },
      {
        name: "langbot_history_page",
        arguments: { limit: 7 },
        authorization: "Bearer upstream-secret",
        session: "session-1",
      },
    ]);

    // Answered from the spec, not forwarded.
    const event = await callTool(
      bridge.url,
      "langbot_get_current_event",
      {},
      auth,
    );
    assert.deepEqual(event.structuredContent!.event, {
      type: "message",
      text: "hello from run-a",
    });
    const listed = await callTool(bridge.url, "langbot_list_assets", {
      include_schemas: true,
    }, auth);
    assert.ok(!JSON.stringify(listed).includes("upstream-secret"));

    const outside = [
      await callTool(
        bridge.url,
        "langbot_call_tool",
        { tool_name: "rm_rf" },
        auth,
      ),
      await callTool(bridge.url, "langbot_get_tool_detail", {
        tool_name: "echo",
      }, auth),
      await callTool(bridge.url, "langbot_retrieve_knowledge", {
        kb_id: "kb-listed",
        query: "q",
      }, auth),
    ];
    for (const result of outside) {
      assert.match(result.content[0].text, /^assets\.forbidden/);
    }
    assert.equal(upstream.calls.length, 2);

    await assertSourceFailed(
      callTool(bridge.url, "langbot_call_tool", { tool_name: "fail" }, auth),
      /tool exploded/,
    );
  } finally {
    await bridge.close();
    await upstream.close();
  }
});

Deno.test("upstream source: gateway strips run_token; an unreachable upstream is an error result", async () => {
  const upstream = startUpstream();
  const gateway = await startAssetGateway({ ttlMs: 60_000 });
  try {
    const run = gateway.register(sampleSpec("run-a", {
      upstream: {
        url: upstream.url,
        headers: { Authorization: "Bearer upstream-secret" },
      },
    }));
    const result = await callTool(gateway.url, "langbot_retrieve_knowledge", {
      kb_id: "kb-docs",
      query: "deno",
      run_token: run.token,
    });
    assert.deepEqual(result.structuredContent, {
      upstream: "langbot_retrieve_knowledge",
    });
    assert.deepEqual(upstream.calls[0].arguments, {
      kb_id: "kb-docs",
      query: "deno",
    });

    const wrongHeaders = gateway.register(
      sampleSpec("run-b", { upstream: { url: upstream.url } }),
    );
    const refused = await callTool(gateway.url, "langbot_call_tool", {
      tool_name: "weather",
    }, bearer(wrongHeaders.token));
    assert.match(refused.content[0].text, /^assets\.source_failed: .*HTTP 401/);
  } finally {
    await gateway.close();
    await upstream.close();
  }
  const deadUrl = upstream.url;
  const bridge = await startEphemeralBridge(
    sampleSpec("run-c", { upstream: { url: deadUrl } }),
  );
  try {
    const text = await assertSourceFailed(
      callTool(bridge.url, "langbot_call_tool", {
        tool_name: "weather",
      }, bearer(bridge.token)),
      /could not connect/,
    );
    assert.ok(!text.includes(deadUrl));
  } finally {
    await bridge.close();
  }
});

/** The receiver side of docs/assets.md's callback verification, written out. */
function receiverAccepts(
  secret: string,
  headers: Headers,
  body: string,
  nowSeconds = Math.floor(Date.now() / 1000),
): boolean {
  const timestamp = headers.get("x-runner-timestamp") ?? "";
  const expected = Buffer.from(
    "sha256=" +
      createHmac("sha256", secret).update(`${timestamp}.${body}`).digest("hex"),
  );
  const given = Buffer.from(headers.get("x-runner-signature") ?? "");
  return /^\d+$/.test(timestamp) &&
    Math.abs(nowSeconds - Number(timestamp)) <= 300 &&
    given.length === expected.length && timingSafeEqual(given, expected);
}

Deno.test("callback source: signed body, verified by the receiver; wrong secret detected", async () => {
  const receiverSecret = "per-run-secret";
  const verdicts: boolean[] = [];
  const receiver = startRecordingServer((request, body) => {
    const valid = receiverAccepts(receiverSecret, request.headers, body);
    verdicts.push(valid);
    if (!valid) {
      return Response.json({ error: "bad signature" }, { status: 401 });
    }
    const { tool, arguments: args } = JSON.parse(body);
    return Response.json(
      tool === "langbot_get_tool_detail" ? "just text" : { echoed: args },
    );
  });
  const good = await startEphemeralBridge(
    sampleSpec("run-a", {
      callback: { url: receiver.url, secret: receiverSecret },
    }),
  );
  const bad = await startEphemeralBridge(
    sampleSpec("run-b", { callback: { url: receiver.url, secret: "guessed" } }),
  );
  try {
    const result = await callTool(good.url, "langbot_call_tool", {
      tool_name: "send_message",
      parameters: { text: "hi" },
    }, bearer(good.token));
    assert.deepEqual(result.structuredContent, {
      echoed: { tool_name: "send_message", parameters: { text: "hi" } },
    });
    assert.deepEqual(JSON.parse(receiver.requests[0].body), {
      run_id: "run-a",
      tool: "langbot_call_tool",
      arguments: { tool_name: "send_message", parameters: { text: "hi" } },
    });
    assert.equal(receiver.requests[0].headers.get("x-runner-run-id"), "run-a");
    assert.match(
      receiver.requests[0].headers.get("x-runner-timestamp") ?? "",
      /^\d+$/,
    );
    const detail = await callTool(good.url, "langbot_get_tool_detail", {
      tool_name: "weather",
    }, bearer(good.token));
    assert.deepEqual(detail.structuredContent, { result: "just text" });

    await assertSourceFailed(
      callTool(bad.url, "langbot_call_tool", {
        tool_name: "weather",
      }, bearer(bad.token)),
      /HTTP 401.*bad signature/,
    );
    assert.deepEqual(verdicts, [true, true, false]);

    const outside = await callTool(good.url, "langbot_call_tool", {
      tool_name: "not_granted",
    }, bearer(good.token));
    assert.match(outside.content[0].text, /^assets\.forbidden/);
    const noHistory = await callTool(bad.url, "langbot_history_page", {
      conversation_id: "other",
    }, bearer(bad.token));
    assert.match(noHistory.content[0].text, /^assets\.forbidden/);
    assert.equal(receiver.requests.length, 3);
  } finally {
    await good.close();
    await bad.close();
    await receiver.close();
  }
});

Deno.test("callback source: the signature covers the timestamp; stale, altered and foreign signatures fail", async () => {
  const secret = "per-run-secret";
  const signedAt = 1_700_000_000;
  const receiver = startRecordingServer(() => Response.json({ ok: true }));
  const source = createCallbackSource({
    url: receiver.url,
    secret,
    runId: "run-a",
    now: () => signedAt * 1000 + 999,
  });
  try {
    const result = await source.callTool("langbot_call_tool", {
      tool_name: "weather",
    });
    assert.deepEqual(result.structuredContent, { ok: true });
    const [{ headers, body }] = receiver.requests;
    assert.equal(headers.get("x-runner-timestamp"), String(signedAt));
    assert.equal(
      headers.get("x-runner-signature"),
      signCallbackBody(secret, signedAt, body),
    );
    const check = {
      secret,
      body,
      timestamp: headers.get("x-runner-timestamp"),
      signature: headers.get("x-runner-signature"),
      now: () => signedAt * 1000,
    };
    assert.ok(receiverAccepts(secret, headers, body, signedAt));
    assert.equal(verifyCallbackSignature(check), true);
    assert.equal(
      verifyCallbackSignature({ ...check, now: () => (signedAt + 300) * 1000 }),
      true,
    );
    // Replayed later: the timestamp is stale.
    assert.equal(
      verifyCallbackSignature({ ...check, now: () => (signedAt + 301) * 1000 }),
      false,
    );
    assert.ok(!receiverAccepts(secret, headers, body, signedAt + 301));
    // A fresh timestamp pasted onto the old signature does not match it.
    const moved = String(signedAt + 400);
    assert.equal(
      verifyCallbackSignature({
        ...check,
        timestamp: moved,
        now: () => (signedAt + 400) * 1000,
      }),
      false,
    );
    const movedHeaders = new Headers(headers);
    movedHeaders.set("x-runner-timestamp", moved);
    assert.ok(!receiverAccepts(secret, movedHeaders, body, signedAt + 400));
    assert.equal(
      verifyCallbackSignature({ ...check, body: body.replace("weather", "x") }),
      false,
    );
    assert.equal(verifyCallbackSignature({ ...check, secret: "other" }), false);
    assert.ok(!receiverAccepts("other", headers, body, signedAt));
    assert.equal(verifyCallbackSignature({ ...check, timestamp: null }), false);
    assert.equal(verifyCallbackSignature({ ...check, signature: null }), false);
  } finally {
    await receiver.close();
  }
});

Deno.test("no source: only the event and the listing answer", async () => {
  const spec = sampleSpec("run-a");
  delete spec.source;
  const bridge = await startEphemeralBridge(spec);
  try {
    const auth = bearer(bridge.token);
    const event = await callTool(
      bridge.url,
      "langbot_get_current_event",
      {},
      auth,
    );
    assert.equal(event.structuredContent!.run_id, "run-a");
    const listed = await callTool(bridge.url, "langbot_list_assets", {
      asset_types: ["event"],
    }, auth);
    assert.deepEqual(listed.structuredContent!.event, {
      available: true,
      tool_name: "langbot_get_current_event",
    });
    for (
      const [name, args] of [
        ["langbot_history_page", {}],
        ["langbot_retrieve_knowledge", { kb_id: "kb-docs", query: "x" }],
        ["langbot_get_tool_detail", { tool_name: "weather" }],
        ["langbot_call_tool", { tool_name: "weather" }],
      ] as const
    ) {
      const result = await callTool(bridge.url, name, args, auth);
      assert.match(
        result.content[0].text,
        /^assets\.no_source: There is no asset source for this run/,
      );
    }
  } finally {
    await bridge.close();
  }
});
