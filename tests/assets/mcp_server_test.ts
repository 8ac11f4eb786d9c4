import assert from "node:assert/strict";
import { createAssetBackend } from "../../lib/assets/mcp/server.ts";
import { sampleHistory, sampleSpec } from "../assets_test_helpers.ts";

interface Page {
  items: { id: string; attachments?: unknown }[];
  has_more: boolean;
  next_cursor: string | null;
  before_cursor: string | null;
  after_cursor: string | null;
}

function historyBackend(count: number) {
  return createAssetBackend(
    sampleSpec("run-h", { inline: { history: sampleHistory(count) } }),
  );
}

let id = 0;
async function call(
  backend: ReturnType<typeof createAssetBackend>,
  name: string,
  args: Record<string, unknown>,
) {
  const reply = await backend.handle({
    jsonrpc: "2.0",
    id: ++id,
    method: "tools/call",
    params: { name, arguments: args },
  }) as {
    result: {
      structuredContent?: unknown;
      isError?: boolean;
      content: { text: string }[];
    };
  };
  return reply.result;
}

async function page(
  backend: ReturnType<typeof createAssetBackend>,
  args: Record<string, unknown>,
) {
  const result = await call(backend, "langbot_history_page", args);
  assert.ok(!result.isError, result.content[0].text);
  return result.structuredContent as Page;
}

Deno.test("history: 120 items paged backward return each item exactly once", async () => {
  const backend = historyBackend(120);
  const seen: string[] = [];
  const sizes: number[] = [];
  let cursor: string | null = null;
  do {
    const result: Page = await page(
      backend,
      cursor ? { before_cursor: cursor } : {},
    );
    sizes.push(result.items.length);
    seen.unshift(...result.items.map((item) => item.id));
    cursor = result.next_cursor;
    assert.deepEqual(result.has_more, cursor !== null);
  } while (cursor);
  assert.deepEqual(sizes, [50, 50, 20]);
  assert.deepEqual(seen, sampleHistory(120).map((item) => item.id));
});

Deno.test("history: 120 items paged forward return each item exactly once, oldest first", async () => {
  const backend = historyBackend(120);
  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const result: Page = await page(backend, {
      direction: "forward",
      limit: 33,
      ...(cursor ? { after_cursor: cursor } : {}),
    });
    seen.push(...result.items.map((item) => item.id));
    cursor = result.next_cursor;
    pages++;
  } while (cursor);
  assert.equal(pages, 4);
  assert.deepEqual(seen, sampleHistory(120).map((item) => item.id));
});

Deno.test("history: cursors turn around, attachments only on request, empty history", async () => {
  const backend = historyBackend(120);
  const newest = await page(backend, { limit: 10 });
  assert.equal(newest.items.map((item) => item.id)[0], "m110");
  assert.equal(newest.items.some((item) => "attachments" in item), false);
  const older = await page(backend, {
    limit: 10,
    before_cursor: newest.before_cursor,
  });
  assert.equal(older.items[9].id, "m109");
  const backAgain = await page(backend, {
    direction: "forward",
    limit: 5,
    after_cursor: older.after_cursor,
  });
  assert.deepEqual(backAgain.items.map((item) => item.id), [
    "m110",
    "m111",
    "m112",
    "m113",
    "m114",
  ]);
  const between = await page(backend, {
    direction: "forward",
    after_cursor: older.before_cursor,
    before_cursor: newest.after_cursor,
  });
  const betweenIds = between.items.map((item) => item.id);
  assert.deepEqual([betweenIds.length, betweenIds[0], betweenIds.at(-1)], [
    18,
    "m101",
    "m118",
  ]);
  assert.equal(between.has_more, false);
  const withFiles = await page(backend, {
    limit: 3,
    include_attachments: true,
  });
  assert.deepEqual(
    withFiles.items.map((item) => item.attachments !== undefined),
    [
      true,
      false,
      false,
    ],
  );

  const empty = await page(historyBackend(0), {});
  assert.deepEqual(empty, {
    conversation_id: "conv-run-h",
    items: [],
    direction: "backward",
    has_more: false,
    next_cursor: null,
    before_cursor: null,
    after_cursor: null,
  } as unknown as Page);
});

Deno.test("knowledge: term match, filters, top_k and the query alias", async () => {
  const backend = createAssetBackend(sampleSpec("run-k", {
    inline: {
      knowledge: [{
        kb_id: "kb-docs",
        snippets: [
          { text: "Alpha beta", metadata: { lang: "en" } },
          { text: "alpha gamma", score: 0.9, metadata: { lang: "de" } },
          { text: "知识库 检索", metadata: { lang: "zh" } },
          { text: "unrelated" },
        ],
      }],
    },
  }));
  const byQuery = await call(backend, "langbot_retrieve_knowledge", {
    kb_id: "kb-docs",
    query: "ALPHA beta",
  });
  const results = (byQuery.structuredContent as {
    results: { text: string; score: number }[];
  }).results;
  assert.deepEqual(results.map((r) => [r.text, r.score]), [["Alpha beta", 1], [
    "alpha gamma",
    0.5,
  ]]);
  const filtered = await call(backend, "langbot_retrieve_knowledge", {
    kb_id: "kb-docs",
    query_text: "alpha",
    filters: { lang: "de" },
    top_k: 1,
  });
  assert.deepEqual(
    (filtered.structuredContent as { results: { text: string }[] }).results.map(
      (r) => r.text,
    ),
    ["alpha gamma"],
  );
  const chinese = await call(backend, "langbot_retrieve_knowledge", {
    kb_id: "kb-docs",
    query: "检索",
  });
  assert.equal(
    (chinese.structuredContent as { results: unknown[] }).results.length,
    1,
  );
});

Deno.test("backend: JSON-RPC shapes without HTTP", async () => {
  const backend = createAssetBackend(sampleSpec("run-j"));
  assert.equal(
    await backend.handle({
      jsonrpc: "2.0",
      method: "notifications/initialized",
    }),
    null,
  );
  assert.equal(
    await backend.handle([{
      jsonrpc: "2.0",
      method: "notifications/cancelled",
    }]),
    null,
  );
  assert.deepEqual(
    await backend.handle({
      jsonrpc: "2.0",
      id: 1,
      method: "tools/call",
      params: [],
    }),
    {
      jsonrpc: "2.0",
      id: 1,
      error: {
        code: -32602,
        message: "Invalid params: tools/call needs {name, arguments?}",
      },
    },
  );
  assert.deepEqual(
    await backend.handle({ jsonrpc: "2.0", id: {}, method: "ping" }),
    {
      jsonrpc: "2.0",
      id: null,
      error: { code: -32600, message: "Invalid Request" },
    },
  );
  const list = await backend.handle({
    jsonrpc: "2.0",
    id: 2,
    method: "tools/list",
  }) as {
    result: {
      tools: {
        name: string;
        inputSchema: { properties: Record<string, { default?: unknown }> };
      }[];
    };
  };
  const history = list.result.tools.find((tool) =>
    tool.name === "langbot_history_page"
  )!;
  assert.equal(history.inputSchema.properties.limit.default, 50);
  assert.equal(history.inputSchema.properties.direction.default, "backward");
  const gatewayList = await createAssetBackend(sampleSpec("run-j"), {
    gateway: true,
  })
    .handle({ jsonrpc: "2.0", id: 3, method: "tools/list" }) as typeof list;
  assert.ok(
    gatewayList.result.tools.every((tool) =>
      "run_token" in tool.inputSchema.properties
    ),
  );
  const missing = await call(backend, "langbot_call_tool", {
    tool_name: "detail_only",
    parameters: {},
  });
  assert.match(missing.content[0].text, /^assets\.forbidden/);
});
