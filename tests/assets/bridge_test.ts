import assert from "node:assert/strict";
import {
  startAssetGateway,
  startEphemeralBridge,
} from "../../lib/assets/bridge.ts";
import type { AssetGrant } from "../../lib/assets/grant.ts";
import {
  bearer,
  callTool,
  postMcp,
  sampleSpec,
  type ToolResult,
} from "../assets_test_helpers.ts";

const TOOL_NAMES = [
  "langbot_list_assets",
  "langbot_get_current_event",
  "langbot_history_page",
  "langbot_retrieve_knowledge",
  "langbot_get_tool_detail",
  "langbot_call_tool",
];

function parsedText(result: ToolResult): unknown {
  return JSON.parse(result.content[0].text);
}

Deno.test("ephemeral bridge: initialize, list tools and call all six with inline data", async () => {
  const bridge = await startEphemeralBridge(sampleSpec("run-a"));
  try {
    assert.match(bridge.url, /^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
    assert.deepEqual(bridge.mcpServer, {
      type: "http",
      name: "langbot_assets",
      url: bridge.url,
      headers: [{ name: "Authorization", value: `Bearer ${bridge.token}` }],
    });
    const auth = bearer(bridge.token);

    const init = await postMcp(bridge.url, {
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: {
        protocolVersion: "2025-06-18",
        capabilities: {},
        clientInfo: { name: "t", version: "1" },
      },
    }, auth);
    const initResult =
      (init.body as { result: Record<string, unknown> }).result;
    assert.equal(initResult.protocolVersion, "2025-06-18");
    assert.ok((initResult.capabilities as Record<string, unknown>).tools);
    assert.equal(
      (initResult.serverInfo as { name: string }).name,
      "langbot-assets",
    );

    const initialized = await postMcp(bridge.url, {
      jsonrpc: "2.0",
      method: "notifications/initialized",
    }, auth);
    assert.deepEqual(initialized, { status: 202, body: null });
    const ping = await postMcp(bridge.url, {
      jsonrpc: "2.0",
      id: "p",
      method: "ping",
    }, auth);
    assert.deepEqual(ping.body, { jsonrpc: "2.0", id: "p", result: {} });

    const list = await postMcp(bridge.url, {
      jsonrpc: "2.0",
      id: 2,
      method: "tools/list",
    }, auth);
    const tools = (list.body as {
      result: {
        tools: { name: string; inputSchema: Record<string, unknown> }[];
      };
    })
      .result.tools;
    assert.deepEqual(tools.map((tool) => tool.name), TOOL_NAMES);
    for (const tool of tools) {
      assert.equal(tool.inputSchema.additionalProperties, false);
      assert.ok(
        !("run_token" in
          (tool.inputSchema.properties as Record<string, unknown>)),
      );
    }

    const assets = await callTool(bridge.url, "langbot_list_assets", {}, auth);
    assert.deepEqual(parsedText(assets), assets.structuredContent);
    const listed = assets.structuredContent!;
    assert.equal(listed.run_id, "run-a");
    assert.deepEqual(listed.event, {
      available: true,
      tool_name: "langbot_get_current_event",
    });
    assert.deepEqual(listed.history, {
      available: true,
      tool_name: "langbot_history_page",
    });
    assert.deepEqual(listed.knowledge_bases, [
      {
        kb_id: "kb-docs",
        name: "Docs",
        type: "vector",
        operations: ["retrieve"],
      },
      {
        kb_id: "kb-listed",
        name: "Listed only",
        type: "",
        operations: ["list"],
      },
    ]);
    assert.deepEqual(
      (listed.tools as { tool_name: string }[]).map((t) => t.tool_name),
      [
        "weather",
        "echo",
        "detail_only",
      ],
    );
    assert.deepEqual(listed.platform_tools, [{
      tool_name: "send_message",
      type: "platform",
      description: "Reply in the chat",
      operations: ["detail", "call"],
    }]);
    assert.deepEqual(listed.mcp_tools, [{
      tool_name: "search_web",
      description: "Web search",
    }]);
    assert.deepEqual(listed.skills, [{
      name: "summarize",
      description: "Summaries",
    }]);

    const onlyPlatform = await callTool(bridge.url, "langbot_list_assets", {
      asset_types: ["platform_tools"],
      include_schemas: true,
    }, auth);
    assert.deepEqual(Object.keys(onlyPlatform.structuredContent!), [
      "run_id",
      "asset_types",
      "platform_tools",
    ]);

    const event = await callTool(
      bridge.url,
      "langbot_get_current_event",
      {},
      auth,
    );
    assert.deepEqual(event.structuredContent, {
      run_id: "run-a",
      conversation_id: "conv-run-a",
      event: { type: "message", text: "hello from run-a" },
    });

    const history = await callTool(bridge.url, "langbot_history_page", {
      limit: 2,
    }, auth);
    const page = history.structuredContent!;
    assert.deepEqual((page.items as { id: string }[]).map((item) => item.id), [
      "m3",
      "m4",
    ]);
    assert.equal(page.has_more, true);

    const knowledge = await callTool(bridge.url, "langbot_retrieve_knowledge", {
      kb_id: "kb-docs",
      query_text: "TypeScript types",
      top_k: 2,
    }, auth);
    assert.deepEqual(knowledge.structuredContent, {
      kb_id: "kb-docs",
      query_text: "TypeScript types",
      top_k: 2,
      results: [
        {
          text: "TypeScript adds types to JavaScript.",
          score: 1,
          metadata: { lang: "en" },
        },
        {
          text: "Deno runs TypeScript directly.",
          score: 0.5,
          metadata: { lang: "en" },
        },
      ],
    });

    const detail = await callTool(bridge.url, "langbot_get_tool_detail", {
      tool_name: "weather",
    }, auth);
    assert.deepEqual(detail.structuredContent, {
      tool_name: "weather",
      type: "plugin",
      description: "Weather by city",
      operations: ["detail", "call"],
      schema: { type: "object", properties: { city: { type: "string" } } },
    });

    const called = await callTool(bridge.url, "langbot_call_tool", {
      tool_name: "weather",
      parameters: { city: "Paris" },
    }, auth);
    assert.deepEqual(called, {
      content: [{
        type: "text",
        text: JSON.stringify({ city: "Paris", celsius: 21 }),
      }],
      structuredContent: { city: "Paris", celsius: 21 },
    });
    const wrapped = await callTool(bridge.url, "langbot_call_tool", {
      tool_name: "echo",
    }, auth);
    assert.deepEqual(wrapped.structuredContent, { result: "plain text" });
  } finally {
    await bridge.close();
  }
});

Deno.test("ephemeral bridge: outside the grant and bad arguments are error results", async () => {
  const bridge = await startEphemeralBridge(sampleSpec("run-a"));
  try {
    const auth = bearer(bridge.token);
    const refusals: [string, Record<string, unknown>, RegExp][] = [
      [
        "langbot_call_tool",
        { tool_name: "not_granted" },
        /^assets\.forbidden: Tool "not_granted"/,
      ],
      ["langbot_call_tool", { tool_name: "detail_only" }, /^assets\.forbidden/],
      ["langbot_get_tool_detail", { tool_name: "echo" }, /^assets\.forbidden/],
      [
        "langbot_retrieve_knowledge",
        { kb_id: "kb-listed", query: "x" },
        /^assets\.forbidden/,
      ],
      [
        "langbot_history_page",
        { conversation_id: "someone-else" },
        /^assets\.forbidden/,
      ],
      [
        "langbot_history_page",
        { limit: 0 },
        /^assets\.invalid_arguments: .*limit must be at least 1/,
      ],
      ["langbot_history_page", { limit: 101 }, /limit must be at most 100/],
      [
        "langbot_history_page",
        { direction: "sideways" },
        /direction must be one of/,
      ],
      [
        "langbot_history_page",
        { before_cursor: "bogus" },
        /before_cursor is not a valid cursor/,
      ],
      ["langbot_retrieve_knowledge", {
        kb_id: "kb-docs",
        top_k: 21,
        query: "x",
      }, /top_k must be at most 20/],
      [
        "langbot_retrieve_knowledge",
        { kb_id: "kb-docs", query_text: "  " },
        /query_text \(or query\)/,
      ],
      ["langbot_retrieve_knowledge", { query: "x" }, /kb_id is required/],
      [
        "langbot_get_current_event",
        { run_id: "run-a" },
        /run_id is not a known argument/,
      ],
      [
        "langbot_list_assets",
        { asset_types: ["secrets"] },
        /asset_types\[0\] must be one of/,
      ],
      [
        "langbot_call_tool",
        { tool_name: "weather", run_token: "x" },
        /run_token is not a known argument/,
      ],
    ];
    for (const [name, args, expected] of refusals) {
      const result = await callTool(bridge.url, name, args, auth);
      assert.equal(result.isError, true, `${name} ${JSON.stringify(args)}`);
      assert.equal(result.structuredContent, undefined);
      assert.match(result.content[0].text, expected);
    }
  } finally {
    await bridge.close();
  }
});

Deno.test("ephemeral bridge: tokens, JSON-RPC errors, batches and a 10 MB body", async () => {
  const bridgeA = await startEphemeralBridge(sampleSpec("run-a"));
  const bridgeB = await startEphemeralBridge(sampleSpec("run-b"));
  try {
    const list = { jsonrpc: "2.0", id: 1, method: "tools/list" };
    assert.equal(
      (await postMcp(bridgeB.url, list, bearer(bridgeA.token))).status,
      401,
    );
    assert.equal((await postMcp(bridgeB.url, list)).status, 401);
    const unauthorized = await postMcp(bridgeB.url, list, {
      authorization: "Bearer nope",
    });
    assert.equal(unauthorized.status, 401);
    assert.deepEqual(
      (unauthorized.body as { error: { data: unknown } }).error.data,
      {
        code: "assets.unauthorized",
      },
    );
    assert.ok(!JSON.stringify(unauthorized.body).includes(bridgeB.token));
    const viaHeader = await postMcp(bridgeB.url, list, {
      "X-LangBot-Assets-Token": bridgeB.token,
    });
    assert.equal(viaHeader.status, 200);

    const health = await fetch(bridgeA.url.replace("/mcp", "/healthz"));
    assert.deepEqual(await health.json(), { ok: true });

    const auth = bearer(bridgeA.token);
    const malformed = await postMcp(bridgeA.url, "{not json", auth);
    assert.equal(malformed.status, 400);
    assert.equal(
      (malformed.body as { error: { code: number } }).error.code,
      -32700,
    );

    const batch = await postMcp(bridgeA.url, [
      { jsonrpc: "2.0", id: 1, method: "ping" },
      { jsonrpc: "1.0", id: 2, method: "ping" },
      42,
      { jsonrpc: "2.0", id: 3, method: "resources/list" },
      {
        jsonrpc: "2.0",
        id: 4,
        method: "tools/call",
        params: { name: "langbot_nope" },
      },
      {
        jsonrpc: "2.0",
        id: 5,
        method: "tools/call",
        params: { arguments: {} },
      },
      { jsonrpc: "2.0", method: "notifications/initialized" },
      {
        jsonrpc: "2.0",
        id: 6,
        method: "tools/call",
        params: { name: "langbot_get_current_event" },
      },
    ], auth);
    assert.equal(batch.status, 200);
    const replies = batch.body as {
      id: unknown;
      result?: unknown;
      error?: { code: number };
    }[];
    assert.deepEqual(
      replies.map((reply) => [reply.id, reply.error?.code ?? "ok"]),
      [
        [1, "ok"],
        [2, -32600],
        [null, -32600],
        [3, -32601],
        [4, -32602],
        [5, -32602],
        [6, "ok"],
      ],
    );
    assert.deepEqual((await postMcp(bridgeA.url, [], auth)).body, {
      jsonrpc: "2.0",
      id: null,
      error: { code: -32600, message: "Invalid Request: empty batch" },
    });

    const huge = JSON.stringify({
      jsonrpc: "2.0",
      id: 9,
      method: "ping",
      params: { pad: "x".repeat(10 * 1024 * 1024) },
    });
    const tooLarge = await postMcp(bridgeA.url, huge, auth);
    assert.equal(tooLarge.status, 413);
    assert.deepEqual(
      (tooLarge.body as { error: { data: unknown } }).error.data,
      {
        code: "assets.request_too_large",
      },
    );

    const stillServing = await postMcp(bridgeA.url, {
      jsonrpc: "2.0",
      id: 10,
      method: "ping",
    }, auth);
    assert.deepEqual(stillServing.body, { jsonrpc: "2.0", id: 10, result: {} });
  } finally {
    await bridgeA.close();
    await bridgeB.close();
  }
});

Deno.test("ephemeral bridge: closing ends the run's access", async () => {
  const bridge = await startEphemeralBridge(sampleSpec("run-a"));
  const auth = bearer(bridge.token);
  assert.equal(
    (await postMcp(bridge.url, { jsonrpc: "2.0", id: 1, method: "ping" }, auth))
      .status,
    200,
  );
  await bridge.close();
  let refused = false;
  try {
    await postMcp(bridge.url, { jsonrpc: "2.0", id: 2, method: "ping" }, auth);
  } catch {
    refused = true;
  }
  assert.ok(refused);
});

Deno.test("ephemeral bridge: the token expires after ttlMs", async () => {
  let now = 1_000_000;
  const bridge = await startEphemeralBridge(sampleSpec("run-a"), {
    ttlMs: 5_000,
    now: () => now,
  });
  try {
    const ping = () =>
      postMcp(
        bridge.url,
        { jsonrpc: "2.0", id: 1, method: "ping" },
        bearer(bridge.token),
      );
    assert.equal((await ping()).status, 200);
    now += 4_999;
    assert.equal((await ping()).status, 200);
    now += 1;
    const expired = await ping();
    assert.equal(expired.status, 401);
    assert.ok(!JSON.stringify(expired.body).includes(bridge.token));
  } finally {
    await bridge.close();
  }
});

async function listedNames(
  url: string,
  headers: Record<string, string>,
): Promise<string[]> {
  const reply = await postMcp(url, {
    jsonrpc: "2.0",
    id: 1,
    method: "tools/list",
  }, headers);
  assert.equal(reply.status, 200);
  return (reply.body as { result: { tools: { name: string }[] } }).result
    .tools.map((tool) => tool.name);
}

Deno.test("ephemeral bridge: tools/list follows the grant; the gateway keeps the full list", async (t) => {
  const cases: [string, AssetGrant, string[]][] = [
    ["nothing granted", {}, []],
    ["history", { history: true }, ["langbot_history_page"]],
    ["history false", { history: false }, []],
    [
      "a knowledge base without retrieve",
      { knowledgeBases: [{ kb_id: "kb", operations: ["list"] }] },
      [],
    ],
    [
      "a knowledge base with empty operations (all)",
      { knowledgeBases: [{ kb_id: "kb", operations: [] }] },
      ["langbot_retrieve_knowledge"],
    ],
    [
      "a detail-only tool",
      { tools: [{ tool_name: "t", operations: ["detail"] }] },
      ["langbot_get_tool_detail"],
    ],
    [
      "a call-only tool",
      { tools: [{ tool_name: "t", operations: ["call"] }] },
      ["langbot_call_tool"],
    ],
    [
      "a tool without operations (all)",
      { tools: [{ tool_name: "t" }] },
      ["langbot_get_tool_detail", "langbot_call_tool"],
    ],
    ["the full sample grant", sampleSpec("x").grant, TOOL_NAMES.slice(2)],
  ];
  const gateway = await startAssetGateway({ ttlMs: 60_000 });
  try {
    for (const [label, grant, extra] of cases) {
      await t.step(label, async () => {
        const spec = { ...sampleSpec("run-g"), grant };
        const bridge = await startEphemeralBridge(spec);
        try {
          assert.deepEqual(
            await listedNames(bridge.url, bearer(bridge.token)),
            [
              "langbot_list_assets",
              "langbot_get_current_event",
              ...extra,
            ],
          );
          if (!extra.includes("langbot_call_tool")) {
            const refused = await callTool(bridge.url, "langbot_call_tool", {
              tool_name: "t",
            }, bearer(bridge.token));
            assert.equal(refused.isError, true);
            assert.match(refused.content[0].text, /^assets\.forbidden/);
          }
          const registration = gateway.register(spec);
          assert.deepEqual(
            await listedNames(gateway.url, bearer(registration.token)),
            TOOL_NAMES,
          );
          assert.deepEqual(await listedNames(gateway.url, {}), TOOL_NAMES);
          if (!extra.includes("langbot_history_page")) {
            const refused = await callTool(
              gateway.url,
              "langbot_history_page",
              {},
              bearer(registration.token),
            );
            assert.equal(refused.isError, true);
            assert.match(refused.content[0].text, /^assets\.forbidden/);
          }
          registration.revoke();
        } finally {
          await bridge.close();
        }
      });
    }
  } finally {
    await gateway.close();
  }
});
