import assert from "node:assert/strict";
import { startAssetGateway } from "../../lib/assets/bridge.ts";
import {
  bearer,
  callTool,
  postMcp,
  sampleSpec,
} from "../assets_test_helpers.ts";
import { closeAll, openHalfSent } from "../raw_tcp_helpers.ts";

const LIST = { jsonrpc: "2.0", id: 1, method: "tools/list" };

Deno.test("gateway: stable tool list without a token, calls by header or run_token", async () => {
  const gateway = await startAssetGateway({ ttlMs: 60_000 });
  try {
    const init = await postMcp(gateway.url, {
      jsonrpc: "2.0",
      id: 0,
      method: "initialize",
      params: {
        protocolVersion: "2025-06-18",
        capabilities: {},
        clientInfo: { name: "dify", version: "1" },
      },
    });
    assert.equal(init.status, 200);
    const anonymous = await postMcp(gateway.url, LIST);
    assert.equal(anonymous.status, 200);
    const tools = (anonymous.body as {
      result: {
        tools: {
          name: string;
          inputSchema: { properties: Record<string, { type: string }> };
        }[];
      };
    }).result.tools;
    assert.equal(tools.length, 6);
    for (const tool of tools) {
      assert.equal(tool.inputSchema.properties.run_token.type, "string");
    }

    const runA = gateway.register(sampleSpec("run-a"));
    assert.deepEqual(runA.mcpServer, {
      type: "http",
      name: "langbot_assets",
      url: gateway.url,
      headers: [{ name: "Authorization", value: `Bearer ${runA.token}` }],
    });
    const withToken = await postMcp(gateway.url, LIST, bearer(runA.token));
    assert.deepEqual(withToken.body, anonymous.body);

    const byHeader = await callTool(
      gateway.url,
      "langbot_get_current_event",
      {},
      bearer(runA.token),
    );
    assert.equal(byHeader.structuredContent!.run_id, "run-a");
    const byArgument = await callTool(
      gateway.url,
      "langbot_get_current_event",
      { run_token: runA.token },
    );
    assert.equal(byArgument.structuredContent!.run_id, "run-a");

    const cases: [string, Record<string, unknown>][] = [
      ["langbot_list_assets", {}],
      ["langbot_history_page", { limit: 3 }],
      ["langbot_retrieve_knowledge", { kb_id: "kb-docs", query: "hono" }],
      ["langbot_get_tool_detail", { tool_name: "send_message" }],
      ["langbot_call_tool", {
        tool_name: "weather",
        parameters: { city: "Paris" },
      }],
    ];
    for (const [name, args] of cases) {
      const result = await callTool(gateway.url, name, {
        ...args,
        run_token: runA.token,
      });
      assert.equal(
        result.isError,
        undefined,
        `${name}: ${result.content[0].text}`,
      );
      assert.deepEqual(
        JSON.parse(result.content[0].text),
        result.structuredContent,
      );
    }
    const outside = await callTool(gateway.url, "langbot_call_tool", {
      tool_name: "shell",
      run_token: runA.token,
    });
    assert.equal(outside.isError, true);
    assert.match(outside.content[0].text, /^assets\.forbidden/);

    const noToken = await postMcp(gateway.url, {
      jsonrpc: "2.0",
      id: 2,
      method: "tools/call",
      params: { name: "langbot_get_current_event", arguments: {} },
    });
    assert.equal(noToken.status, 401);
    const badHeader = await postMcp(gateway.url, LIST, bearer("not-a-token"));
    assert.equal(badHeader.status, 401);
  } finally {
    await gateway.close();
  }
});

Deno.test("gateway: run A's token never reaches run B's assets", async () => {
  const gateway = await startAssetGateway({ ttlMs: 60_000 });
  try {
    const specB = sampleSpec("run-b");
    specB.grant.knowledgeBases = [{
      kb_id: "kb-secret-b",
      operations: ["retrieve"],
    }];
    const runA = gateway.register({
      ...sampleSpec("run-a"),
      grant: { history: false },
    });
    const runB = gateway.register(specB);
    assert.ok(runA.token !== runB.token);

    const asA = await callTool(gateway.url, "langbot_retrieve_knowledge", {
      kb_id: "kb-secret-b",
      query: "anything",
    }, bearer(runA.token));
    assert.equal(asA.isError, true);
    const historyAsA = await callTool(
      gateway.url,
      "langbot_history_page",
      {},
      bearer(runA.token),
    );
    assert.match(historyAsA.content[0].text, /^assets\.forbidden/);
    const eventAsA = await callTool(
      gateway.url,
      "langbot_get_current_event",
      {},
      bearer(runA.token),
    );
    assert.equal(eventAsA.structuredContent!.run_id, "run-a");

    // The run_token argument names the run; a header of another run cannot widen it.
    const mixed = await callTool(gateway.url, "langbot_get_current_event", {
      run_token: runA.token,
    }, bearer(runB.token));
    assert.equal(mixed.structuredContent!.run_id, "run-a");
  } finally {
    await gateway.close();
  }
});

Deno.test("gateway: revoked and expired tokens answer 401", async () => {
  let now = 1_000_000;
  const gateway = await startAssetGateway({
    ttlMs: 5_000,
    now: () => now,
    publicUrl: undefined,
  });
  try {
    const runA = gateway.register(sampleSpec("run-a"));
    const runB = gateway.register(sampleSpec("run-b"));
    const call = (token: string, viaArgument: boolean) =>
      postMcp(gateway.url, {
        jsonrpc: "2.0",
        id: 1,
        method: "tools/call",
        params: {
          name: "langbot_get_current_event",
          arguments: viaArgument ? { run_token: token } : {},
        },
      }, viaArgument ? {} : bearer(token));

    assert.equal((await call(runA.token, false)).status, 200);
    runA.revoke();
    assert.equal((await call(runA.token, false)).status, 401);
    assert.equal((await call(runA.token, true)).status, 401);
    assert.equal((await call(runB.token, true)).status, 200);

    now += 5_000;
    const expired = await call(runB.token, true);
    assert.equal(expired.status, 401);
    assert.ok(!JSON.stringify(expired.body).includes(runB.token));
    assert.equal((await call(runB.token, false)).status, 401);
  } finally {
    await gateway.close();
  }
});

Deno.test("gateway: a public URL is what runs are given", async () => {
  const gateway = await startAssetGateway({
    ttlMs: 1_000,
    publicUrl: "https://assets.example.com/mcp",
  });
  try {
    assert.equal(gateway.url, "https://assets.example.com/mcp");
    assert.equal(
      gateway.register(sampleSpec("run-a")).mcpServer.url,
      "https://assets.example.com/mcp",
    );
  } finally {
    await gateway.close();
  }
});

Deno.test("gateway: a burst of half-sent requests that runs it out of file descriptors cannot keep an agent's call out", async () => {
  // 64 open files, far fewer than the gateway's connection cap.
  const child = new Deno.Command("prlimit", {
    args: [
      "--nofile=64:64",
      Deno.execPath(),
      "run",
      "-A",
      new URL("../fixtures/assets_gateway.ts", import.meta.url).pathname,
    ],
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  const stderr = new Response(child.stderr).text();
  try {
    const { value } = await lines.read();
    if (!value) throw new Error(`the gateway did not start: ${await stderr}`);
    const url = JSON.parse(value).url;
    const slow = await openHalfSent(
      url,
      100,
      "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n",
    );
    try {
      const listed = await postMcp(url, LIST);
      assert.equal(listed.status, 200);
    } finally {
      closeAll(slow);
    }
    assert.equal((await postMcp(url, LIST)).status, 200);
  } finally {
    await child.stdin.close();
    await lines.cancel();
    const status = await child.status;
    const log = await stderr;
    assert.equal(status.code, 0, log);
  }
});
