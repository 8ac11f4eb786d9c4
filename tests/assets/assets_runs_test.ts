/**
 * LangBot assets wired into real runs: the run manager with the assets hook
 * and the fixture agent, which calls every HTTP MCP server of its session.
 */

import { runnerLocations } from "../../lib/locations/runner_locations.ts";
import assert from "node:assert/strict";
import { join } from "node:path";
import { verifyCallbackSignature } from "../../lib/assets/mcp/sources.ts";
import type { RunAssetsRequest } from "../../lib/assets/request.ts";
import { createAssetsHook } from "../../lib/assets/wiring.ts";
import { RunnerError } from "../../lib/errors.ts";
import { createReaperRegistry } from "../../lib/agent/reaper.ts";
import type { RunResult } from "../../lib/run/engine.ts";
import { createRunManager, type RunManager } from "../../lib/run/manager.ts";
import { type RunStore } from "../../lib/store/types.ts";
import { openStoreNow } from "../helpers.ts";
import {
  ASSET_TOOL_NAMES,
  listAssetsStatus,
  type RecordingServer,
  sampleAssets,
  startRecordingServer,
  type ToolResult,
} from "../assets_test_helpers.ts";
import { EventLog, fixtureConfig, makeGate } from "../engine_helpers.ts";
import { readRecord, tempDir } from "../helpers.ts";

type Line = Record<string, unknown>;
type ServerEntry = {
  name: string;
  url?: string;
  command?: string;
  headers?: { name: string; value: string }[];
};

interface AssetsHarness {
  manager: RunManager;
  store: RunStore;
  hook: ReturnType<typeof createAssetsHook>;
  logs: Line[];
  close(): Promise<void>;
}

function assetsHarness(): AssetsHarness {
  const dataDir = tempDir();
  const store = openStoreNow(dataDir);
  const logs: Line[] = [];
  const hook = createAssetsHook({ log: (entry) => logs.push(entry) });
  const manager = createRunManager({
    locations: runnerLocations(),
    store,
    registry: createReaperRegistry(join(dataDir, "agents")),
    assets: hook,
    log: (entry) => logs.push(entry),
  });
  return {
    manager,
    store,
    hook,
    logs,
    async close() {
      await hook.close();
      await store.close();
    },
  };
}

interface FixtureRunOptions {
  /** The tool the fixture calls on every HTTP MCP server. */
  tool?: string;
  args?: unknown;
  /** Extra run-config keys. */
  config?: Record<string, unknown>;
  assets?: unknown;
  text?: string;
  /** Fixture flags replacing the default `--mcp-http`. */
  flags?: string[];
}

interface FixtureRun {
  runId: string;
  result: RunResult;
  log: EventLog;
  record: Line[];
}

async function runFixture(
  h: AssetsHarness,
  options: FixtureRunOptions = {},
): Promise<FixtureRun> {
  const record = join(tempDir(), "record.jsonl");
  const flags = [
    ...(options.flags ?? ["--mcp-http"]),
    "--mcp-call",
    "--record",
    record,
    ...(options.tool
      ? [
        "--mcp-tool",
        options.tool,
        "--mcp-args",
        JSON.stringify(options.args ?? {}),
      ]
      : []),
  ];
  const runId = crypto.randomUUID();
  const started = await h.manager.start({
    runId,
    conversationId: `conv-${runId}`,
    input: { text: options.text ?? "hello" },
    config: fixtureConfig(flags, options.config),
    assets: options.assets as RunAssetsRequest,
  });
  const log = new EventLog(started.run);
  const result = await started.run.done;
  return { runId, result, log, record: readRecord(record) };
}

function sessionServers(record: Line[]): ServerEntry[] {
  const line = record.find((entry) => entry.method === "session/new");
  assert.ok(line, "the agent got no session/new");
  return (line.params as { mcpServers: ServerEntry[] }).mcpServers;
}

function assetsEntry(record: Line[]): ServerEntry {
  const entry = sessionServers(record).find((s) => s.name === "langbot_assets");
  assert.ok(entry, "no langbot_assets server in session/new");
  return entry;
}

function mcpAnswer(record: Line[], server: string, method: string): Line {
  const line = record.find((entry) =>
    entry.event === "mcp" && entry.server === server && entry.method === method
  );
  assert.ok(line, `the agent recorded no ${method} answer from ${server}`);
  return line;
}

function toolResult(record: Line[], server = "langbot_assets"): ToolResult {
  const line = mcpAnswer(record, server, "tools/call");
  assert.equal(line.status, 200);
  return (line.body as { result: ToolResult }).result;
}

function firstPromptText(record: Line[]): string {
  const line = record.find((entry) => entry.method === "session/prompt");
  assert.ok(line, "the agent got no prompt");
  const prompt = (line.params as { prompt: { type: string; text?: string }[] })
    .prompt;
  return prompt.map((block) => block.text ?? "").join("\n");
}

/** A minimal MCP server: answers initialize, tools/list and tools/call. */
function startMcpTestServer(
  onCall: (params: { name: string; arguments: unknown }) => unknown,
): RecordingServer {
  return startRecordingServer((_request, body) => {
    const message = JSON.parse(body);
    if (message.id === undefined) return new Response(null, { status: 202 });
    const result = message.method === "initialize"
      ? {
        protocolVersion: "2025-06-18",
        capabilities: { tools: {} },
        serverInfo: { name: "test", version: "1.0.0" },
      }
      : message.method === "tools/list"
      ? { tools: [{ name: "ping_back", inputSchema: { type: "object" } }] }
      : message.method === "tools/call"
      ? onCall(message.params)
      : {};
    return Response.json({ jsonrpc: "2.0", id: message.id, result }, {
      headers: { "mcp-session-id": "test-session" },
    });
  });
}

/** Each of the six tools answers its documented shape, and a call outside the grant is an error result. */
function sixToolSteps(mode: "ephemeral" | "gateway") {
  return async (t: Deno.TestContext) => {
    const h = assetsHarness();
    const config = { "langbot-assets-mode": mode };
    const assets = sampleAssets();
    const call = async (tool: string, args: unknown = {}) => {
      const run = await runFixture(h, { tool, args, config, assets });
      assert.equal(run.result.status, "completed");
      const list = mcpAnswer(run.record, "langbot_assets", "tools/list");
      const names = (list.body as { result: { tools: { name: string }[] } })
        .result.tools.map((tool) => tool.name).sort();
      assert.deepEqual(names, ASSET_TOOL_NAMES);
      return { run, result: toolResult(run.record) };
    };
    await t.step("langbot_list_assets", async () => {
      const { run, result } = await call("langbot_list_assets");
      const listed = result.structuredContent!;
      assert.equal(listed.run_id, run.runId);
      assert.deepEqual(
        (listed.knowledge_bases as { kb_id: string }[]).map((kb) => kb.kb_id),
        ["kb-docs", "kb-listed"],
      );
      assert.deepEqual(
        (listed.platform_tools as { tool_name: string }[]).map((t) =>
          t.tool_name
        ),
        ["send_message"],
      );
      assert.deepEqual(JSON.parse(result.content[0].text), listed);
    });
    await t.step("langbot_get_current_event", async () => {
      const { run, result } = await call("langbot_get_current_event");
      assert.deepEqual(result.structuredContent, {
        run_id: run.runId,
        conversation_id: `conv-${run.runId}`,
        event: assets.event,
      });
    });
    await t.step("langbot_history_page", async () => {
      const { result } = await call("langbot_history_page", { limit: 2 });
      const page = result.structuredContent!;
      assert.deepEqual(
        (page.items as { id: string }[]).map((item) => item.id),
        ["m3", "m4"],
      );
      assert.equal(page.has_more, true);
    });
    await t.step("langbot_retrieve_knowledge", async () => {
      const { result } = await call("langbot_retrieve_knowledge", {
        kb_id: "kb-docs",
        query_text: "Deno TypeScript",
        top_k: 1,
      });
      const answer = result.structuredContent!;
      assert.equal(answer.kb_id, "kb-docs");
      assert.deepEqual(
        (answer.results as { text: string }[]).map((r) => r.text),
        ["Deno runs TypeScript directly."],
      );
    });
    await t.step("langbot_get_tool_detail", async () => {
      const { result } = await call("langbot_get_tool_detail", {
        tool_name: "weather",
      });
      assert.equal(result.structuredContent?.tool_name, "weather");
      assert.deepEqual(result.structuredContent?.operations, [
        "detail",
        "call",
      ]);
    });
    await t.step("langbot_call_tool", async () => {
      const { result } = await call("langbot_call_tool", {
        tool_name: "weather",
        parameters: { city: "Paris" },
      });
      assert.deepEqual(result.structuredContent, {
        city: "Paris",
        celsius: 21,
      });
    });
    await t.step(
      "a tool outside the grant answers an error result",
      async () => {
        const { result } = await call("langbot_call_tool", {
          tool_name: "detail_only",
        });
        assert.equal(result.isError, true);
        assert.ok(result.content[0].text.startsWith("assets.forbidden: "));
      },
    );
    await h.close();
  };
}

Deno.test(
  "ephemeral mode: the agent lists and calls the six asset tools",
  sixToolSteps("ephemeral"),
);

Deno.test(
  "gateway mode: the agent lists and calls the six asset tools",
  sixToolSteps("gateway"),
);

async function postWithToken(entry: ServerEntry): Promise<number | "refused"> {
  try {
    return await listAssetsStatus(entry);
  } catch (error) {
    assert.ok(error instanceof TypeError, String(error));
    return "refused";
  }
}

Deno.test("after an ephemeral run ends its bridge no longer answers its token", async () => {
  const h = assetsHarness();
  const run = await runFixture(h, { tool: "langbot_list_assets" });
  assert.equal(run.result.status, "completed");
  const entry = assetsEntry(run.record);
  assert.ok(new URL(entry.url!).hostname === "127.0.0.1");
  const status = await postWithToken(entry);
  assert.ok(status === 401 || status === "refused", `answered ${status}`);
  await h.close();
});

Deno.test("ephemeral mode: langbot-assets-token-ttl ends the bridge token too", async () => {
  const h = assetsHarness();
  // 1 ms: long expired by the time the spawned agent makes its first call.
  const run = await runFixture(h, {
    tool: "langbot_list_assets",
    config: {
      "langbot-assets-mode": "ephemeral",
      "langbot-assets-token-ttl": 0.001,
    },
  });
  assert.equal(run.result.status, "completed");
  assert.equal(
    mcpAnswer(run.record, "langbot_assets", "initialize").status,
    401,
  );
  assert.ok(
    h.logs.some((line) =>
      String(line.msg).startsWith("langbot-assets-token-ttl is shorter") &&
      line.run_id === run.runId
    ),
  );
  const fresh = await runFixture(h, { tool: "langbot_list_assets" });
  assert.equal(toolResult(fresh.record).structuredContent?.run_id, fresh.runId);
  await h.close();
});

Deno.test("gateway runs share one gateway; a run's token is revoked when it ends", async () => {
  const h = assetsHarness();
  const config = { "langbot-assets-mode": "gateway" };
  const first = await runFixture(h, { tool: "langbot_list_assets", config });
  const second = await runFixture(h, { tool: "langbot_list_assets", config });
  assert.equal(
    toolResult(second.record).structuredContent?.run_id,
    second.runId,
  );
  const a = assetsEntry(first.record);
  const b = assetsEntry(second.record);
  assert.equal(a.url, b.url);
  assert.ok(a.headers![0].value !== b.headers![0].value, "tokens must differ");
  assert.equal(await postWithToken(a), 401);
  assert.equal(await postWithToken(b), 401);
  await h.close();
});

Deno.test("upstream mode forwards the call with the upstream headers the agent never sees", async () => {
  const secret = "upstream-credential-7f3a9c";
  const upstream = startMcpTestServer((params) => ({
    content: [{ type: "text", text: "from upstream" }],
    structuredContent: { from: "upstream", called: params },
  }));
  const h = assetsHarness();
  const run = await runFixture(h, {
    tool: "langbot_call_tool",
    args: { tool_name: "weather", parameters: { city: "Oslo" } },
    assets: {
      grant: { tools: [{ tool_name: "weather" }] },
      upstream: {
        url: `${upstream.url}/mcp`,
        headers: { authorization: `Bearer ${secret}` },
      },
    },
  });
  assert.equal(run.result.status, "completed");
  assert.deepEqual(toolResult(run.record).structuredContent, {
    from: "upstream",
    called: {
      name: "langbot_call_tool",
      arguments: { tool_name: "weather", parameters: { city: "Oslo" } },
    },
  });
  const forwarded = upstream.requests.filter((r) =>
    JSON.parse(r.body).method === "tools/call"
  );
  assert.equal(forwarded.length, 1);
  assert.equal(forwarded[0].headers.get("authorization"), `Bearer ${secret}`);
  const start = run.record.find((line) => line.event === "start")!;
  assert.ok(!JSON.stringify(start.env).includes(secret), "secret in agent env");
  assert.ok(!JSON.stringify(sessionServers(run.record)).includes(secret));
  assert.ok(!firstPromptText(run.record).includes(secret));
  assert.ok(!JSON.stringify(run.log.events).includes(secret));
  await h.close();
  await upstream.close();
});

Deno.test("callback mode posts the signed call to the callback URL", async () => {
  const secret = "callback-secret-51d2";
  const callback = startRecordingServer(() => Response.json({ answer: 42 }));
  const h = assetsHarness();
  const run = await runFixture(h, {
    tool: "langbot_retrieve_knowledge",
    args: { kb_id: "kb-1", query: "meaning" },
    assets: {
      grant: { knowledge_bases: [{ kb_id: "kb-1" }] },
      callback: { url: `${callback.url}/assets`, secret },
    },
  });
  assert.equal(run.result.status, "completed");
  assert.deepEqual(toolResult(run.record).structuredContent, { answer: 42 });
  assert.equal(callback.requests.length, 1);
  const [request] = callback.requests;
  assert.ok(
    verifyCallbackSignature({
      secret,
      body: request.body,
      timestamp: request.headers.get("x-runner-timestamp"),
      signature: request.headers.get("x-runner-signature"),
    }),
    "the receiver could not verify the callback",
  );
  assert.ok(
    !verifyCallbackSignature({
      secret: "not-the-run-secret",
      body: request.body,
      timestamp: request.headers.get("x-runner-timestamp"),
      signature: request.headers.get("x-runner-signature"),
    }),
  );
  assert.equal(request.headers.get("x-runner-run-id"), run.runId);
  const body = JSON.parse(request.body);
  assert.equal(body.tool, "langbot_retrieve_knowledge");
  assert.equal(body.arguments.kb_id, "kb-1");
  assert.ok(!JSON.stringify(sessionServers(run.record)).includes(secret));
  await h.close();
  await callback.close();
});

Deno.test("the asset secrets of a request are redacted from the run's events", async () => {
  const secret = "callback-secret-e9b0";
  const h = assetsHarness();
  const run = await runFixture(h, {
    text: `please repeat ${secret}`,
    assets: { callback: { url: "http://127.0.0.1:9/none", secret } },
  });
  assert.equal(run.result.status, "completed");
  const stored = JSON.stringify(await h.store.getEvents(run.runId));
  assert.ok(stored.includes("[REDACTED]"));
  assert.ok(!stored.includes(secret));
  await h.close();
});

Deno.test("without an asset source the event and the listing still answer", async () => {
  const h = assetsHarness();
  const event = await runFixture(h, {
    tool: "langbot_get_current_event",
    text: "what is new",
  });
  assert.deepEqual(toolResult(event.record).structuredContent, {
    run_id: event.runId,
    conversation_id: `conv-${event.runId}`,
    event: { type: "message", text: "what is new" },
  });
  const listed = await runFixture(h, {
    tool: "langbot_list_assets",
    config: { "knowledge-bases": "kb-a" },
  });
  const answer = toolResult(listed.record).structuredContent!;
  assert.deepEqual(answer.history, {
    available: false,
    tool_name: "langbot_history_page",
  });
  assert.deepEqual(answer.knowledge_bases, [
    { kb_id: "kb-a", name: "kb-a", type: "", operations: ["retrieve"] },
  ]);
  const retrieve = await runFixture(h, {
    tool: "langbot_retrieve_knowledge",
    args: { kb_id: "kb-a", query: "x" },
    config: { "knowledge-bases": "kb-a" },
  });
  const failed = toolResult(retrieve.record);
  assert.equal(failed.isError, true);
  assert.ok(failed.content[0].text.startsWith("assets.no_source: "));
  await h.close();
});

Deno.test("langbot-assets-enabled=false injects no langbot server but keeps mcp-servers-json", async () => {
  const h = assetsHarness();
  const user = { name: "files", command: "/bin/true", args: ["--serve"] };
  const run = await runFixture(h, {
    config: {
      "langbot-assets-enabled": false,
      "mcp-servers-json": JSON.stringify([user]),
    },
  });
  assert.equal(run.result.status, "completed");
  assert.deepEqual(sessionServers(run.record), [{ ...user, env: [] }]);
  await h.close();
});

Deno.test("mcp-servers-json adds the user's server next to langbot_assets", async () => {
  const userServer = startMcpTestServer(() => ({}));
  const h = assetsHarness();
  const json = JSON.stringify({
    mcpServers: {
      mine: {
        type: "http",
        url: `${userServer.url}/mcp`,
        headers: { "x-k": "v" },
      },
    },
  });
  const run = await runFixture(h, { config: { "mcp-servers-json": json } });
  assert.equal(run.result.status, "completed");
  assert.deepEqual(sessionServers(run.record).map((s) => s.name), [
    "langbot_assets",
    "mine",
  ]);
  assert.equal(mcpAnswer(run.record, "mine", "tools/list").status, 200);
  assert.equal(userServer.requests[0].headers.get("x-k"), "v");
  await h.close();
  await userServer.close();
});

Deno.test("an http server in mcp-servers-json fails the run when the agent lacks mcpCapabilities.http", async () => {
  const h = assetsHarness();
  const json = JSON.stringify([
    { type: "http", name: "mine", url: "http://127.0.0.1:9/mcp" },
  ]);
  const run = await runFixture(h, {
    flags: [],
    config: { "mcp-servers-json": json },
  });
  assert.equal(run.result.code, "config.invalid");
  const failed = run.log.ofType("run.failed")[0];
  assert.ok(String(failed.data.error).includes("mcpCapabilities.http"));
  assert.ok(run.record.some((line) => line.method === "initialize"));
  assert.ok(!run.record.some((line) => line.method === "session/new"));
  await h.close();
});

Deno.test("langbot_assets is an http server for agents with MCP over HTTP, else the runner mcp-stdio bridge", async () => {
  const h = assetsHarness();
  for (const mode of ["ephemeral", "gateway"]) {
    const config = { "langbot-assets-mode": mode };
    const without = await runFixture(h, {
      flags: [],
      config,
      tool: "langbot_get_current_event",
    });
    assert.equal(without.result.status, "completed");
    const [bridge] = sessionServers(without.record);
    assert.equal(bridge.name, "langbot_assets");
    assert.equal((bridge as { type?: string }).type, undefined);
    assert.equal(
      (bridge as unknown as { args: string[] }).args.at(-1),
      "mcp-stdio",
    );
    assert.equal(
      toolResult(without.record).structuredContent?.run_id,
      without.runId,
      "the stdio bridge reaches the run's assets",
    );
    const sseOnly = await runFixture(h, { flags: ["--mcp-sse"], config });
    assert.equal(sseOnly.result.status, "completed");
    assert.deepEqual(sessionServers(sseOnly.record).map((s) => s.name), [
      "langbot_assets",
    ]);
    const withHttp = await runFixture(h, {
      tool: "langbot_list_assets",
      config,
    });
    assert.deepEqual(sessionServers(withHttp.record).map((s) => s.name), [
      "langbot_assets",
    ]);
    assert.equal(
      toolResult(withHttp.record).structuredContent?.run_id,
      withHttp.runId,
    );
  }
  await h.close();
});

Deno.test("over remote-ssh the langbot entry stays in the static list the location forwards", async () => {
  const h = assetsHarness();
  const prepared = await h.hook.prepare({
    runId: "over-ssh",
    request: {
      input: { text: "x" },
      config: fixtureConfig([], {
        location: "remote-ssh",
        "ssh-target": "user@host",
      }),
    },
  });
  assert.deepEqual(prepared.mcpServers.map((s) => s.name), ["langbot_assets"]);
  assert.deepEqual(prepared.sessionMcpServers!({ http: true }), []);
  assert.deepEqual(prepared.sessionMcpServers!({}), []);
  prepared.release();
  await h.close();
});

Deno.test("append-run-scope-prompt puts the run-scope note, never the token, in the first prompt", async () => {
  const h = assetsHarness();
  const run = await runFixture(h, {
    text: "do the thing",
    config: { "append-run-scope-prompt": true },
    assets: sampleAssets(),
  });
  const prompt = firstPromptText(run.record);
  assert.ok(prompt.startsWith(`[LangBot run scope] Run id ${run.runId} `));
  assert.ok(prompt.includes("kb-docs (Docs)"));
  assert.ok(prompt.endsWith("do the thing"));
  const token = assetsEntry(run.record).headers![0].value.slice(
    "Bearer ".length,
  );
  assert.ok(!prompt.includes(token), "the token leaked into the prompt");
  const plain = await runFixture(h, { text: "plain" });
  assert.equal(firstPromptText(plain.record), "plain");
  await h.close();
});

Deno.test("a bad assets field is refused before the run starts", async () => {
  const h = assetsHarness();
  const start = async (assets: unknown) => {
    try {
      await h.manager.start({
        input: { text: "x" },
        config: fixtureConfig([]),
        assets: assets as RunAssetsRequest,
      });
    } catch (error) {
      assert.ok(error instanceof RunnerError);
      return error;
    }
    throw new Error("the run started");
  };
  const unknown = await start({ grant: {}, extra: 1 });
  assert.equal(unknown.code, "config.invalid");
  assert.ok(unknown.message.includes("unknown field(s) extra"));
  const two = await start({
    inline: {},
    callback: { url: "http://127.0.0.1:9" },
  });
  assert.ok(two.message.includes("at most one source"));
  const unsigned = await start({ callback: { url: "http://127.0.0.1:9" } });
  assert.equal(unsigned.code, "config.invalid");
  assert.ok(
    unsigned.message.includes("assets.callback.secret is required"),
    unsigned.message,
  );
  const blank = await start({
    callback: { url: "http://127.0.0.1:9", secret: " " },
  });
  assert.ok(
    blank.message.includes("assets.callback.secret must be a non-empty string"),
    blank.message,
  );
  const bad = await start({
    upstream: { url: "ftp://x", headers: { "bad name": "hidden-value-1" } },
    grant: { tools: [{ tool_name: "" }], history: "yes" },
  });
  for (
    const part of [
      "assets.upstream.url must be an http:// or https:// URL",
      '"bad name" is not a header name',
      "assets.grant.tools[0].tool_name must be a non-empty string",
      "assets.grant.history must be true or false",
    ]
  ) {
    assert.ok(bad.message.includes(part), `${part} in ${bad.message}`);
  }
  assert.ok(!bad.message.includes("hidden-value-1"));
  assert.equal((await h.store.listRuns({ limit: 10 })).length, 0);
  await h.close();
});

Deno.test("backendForRun answers for an active run and forgets it when the run ends", async () => {
  const h = assetsHarness();
  const gate = await makeGate();
  const runId = "run-backend";
  const started = await h.manager.start({
    runId,
    input: { text: "hi" },
    config: fixtureConfig(["--mcp-http", "--gate-fifo", gate.path]),
    assets: { grant: { history: true }, event: { text: "e" } },
  });
  const log = new EventLog(started.run);
  await log.waitFor((event) => event.type === "state.updated");
  const backend = h.hook.backendForRun(runId);
  assert.ok(backend, "no backend for the active run");
  const reply = await backend.handle({
    jsonrpc: "2.0",
    id: 1,
    method: "tools/call",
    params: { name: "langbot_get_current_event", arguments: {} },
  }) as { result: ToolResult };
  assert.deepEqual(reply.result.structuredContent?.event, { text: "e" });
  await gate.release();
  assert.equal((await started.run.done).status, "completed");
  assert.equal(h.hook.backendForRun(runId), undefined);
  await h.close();
});

Deno.test("attachRun gives a daemon run its backend and run-scope note", async () => {
  const h = assetsHarness();
  const attached = h.hook.attachRun({
    runId: "daemon-run",
    request: {
      input: { text: "hi" },
      config: fixtureConfig([], { "append-run-scope-prompt": true }),
      assets: sampleAssets(),
    },
  });
  assert.ok(attached.promptPrefix?.includes("Run id daemon-run"));
  const backend = h.hook.backendForRun("daemon-run");
  const reply = await backend!.handle({
    jsonrpc: "2.0",
    id: 1,
    method: "tools/call",
    params: { name: "langbot_list_assets", arguments: {} },
  }) as { result: ToolResult };
  assert.equal(reply.result.structuredContent?.run_id, "daemon-run");
  attached.release();
  assert.equal(h.hook.backendForRun("daemon-run"), undefined);
  await h.close();
});

Deno.test("gateway settings: the public URL goes to the agent; a taken port fails with assets.listen_failed", async () => {
  const h = assetsHarness();
  const request = (extra: Record<string, unknown>) => ({
    input: { text: "x" },
    config: fixtureConfig([], { "langbot-assets-mode": "gateway", ...extra }),
  });
  const prepared = await h.hook.prepare({
    runId: "public-url",
    request: request({
      "langbot-assets-gateway-public-url": "https://assets.example.com/mcp",
    }),
  });
  assert.deepEqual(prepared.mcpServers, []);
  assert.equal(
    (prepared.sessionMcpServers!({ http: true })[0] as { url: string }).url,
    "https://assets.example.com/mcp",
  );
  assert.equal(prepared.secrets?.length, 1);
  prepared.release();
  const taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const failure = await h.hook.prepare({
    runId: "taken",
    request: request({ "langbot-assets-gateway-port": taken.addr.port }),
  }).then(() => undefined, (error) => error);
  assert.ok(failure instanceof RunnerError);
  assert.equal(failure.code, "assets.listen_failed");
  assert.equal(h.hook.backendForRun("taken"), undefined);
  taken.close();
  const badUrl = await h.hook.prepare({
    runId: "bad-url",
    request: request({ "langbot-assets-gateway-public-url": "assets" }),
  }).then(() => undefined, (error) => error);
  assert.equal(badUrl?.code, "config.invalid");
  await h.close();
});
