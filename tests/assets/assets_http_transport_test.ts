/**
 * `mcp-bridge-transport=http`: the config rules, and runs sharing the
 * operator's bridge address, each by its own token, with the public URL in
 * the agent's entry and nothing for `ssh -R` to forward.
 */

import assert from "node:assert/strict";
import { parseRunConfig, type RunConfig } from "../../lib/config.ts";
import { RunnerError } from "../../lib/errors.ts";
import { createAssetsHook } from "../../lib/assets/wiring.ts";
import { resolveCallerConfig } from "../../lib/server/policy.ts";
import { callTool, postMcp } from "../assets_test_helpers.ts";
import { freePort } from "../ssh_helpers.ts";

const REMOTE = {
  provider: "custom",
  "acp-command": "agent --acp",
  location: "remote-ssh",
  "ssh-target": "user@host",
  workspace: "/srv/w",
};

function refusal(config: Record<string, unknown>): RunnerError {
  try {
    parseRunConfig(config);
  } catch (error) {
    assert.ok(error instanceof RunnerError);
    assert.equal(error.code, "config.invalid");
    return error;
  }
  throw new Error(`accepted ${JSON.stringify(config)}`);
}

Deno.test("mcp-bridge-transport: ssh-tunnel by default; http needs mcp-public-url and, for a bridge, mcp-bridge-port", () => {
  const plain = parseRunConfig(REMOTE);
  assert.equal(plain.mcpBridgeTransport, "ssh-tunnel");
  assert.equal(plain.mcpBridgeHost, "127.0.0.1");

  const noUrl = refusal({ ...REMOTE, "mcp-bridge-transport": "http" });
  assert.equal(noUrl.detail?.key, "mcp-public-url");
  assert.match(
    noUrl.message,
    /mcp-public-url: is required when mcp-bridge-transport=http/,
  );

  const noPort = refusal({
    ...REMOTE,
    "mcp-bridge-transport": "http",
    "mcp-public-url": "https://runner.example/mcp",
  });
  assert.equal(noPort.detail?.key, "mcp-bridge-port");

  const badUrl = refusal({
    ...REMOTE,
    "mcp-bridge-transport": "http",
    "mcp-bridge-port": 8770,
    "mcp-public-url": "runner.example:8770/mcp",
  });
  assert.match(
    badUrl.message,
    /mcp-public-url: must be an http:\/\/ or https:\/\/ URL/,
  );

  assert.equal(
    refusal({ ...REMOTE, "mcp-bridge-transport": "tcp" }).detail?.key,
    "mcp-bridge-transport",
  );

  // The gateway's own address serves when langbot-assets-mode=gateway.
  const overGateway = parseRunConfig({
    ...REMOTE,
    "mcp-bridge-transport": "http",
    "langbot-assets-mode": "gateway",
    "mcp-public-url": "https://runner.example/mcp",
  });
  assert.equal(overGateway.mcpPublicUrl, "https://runner.example/mcp");
});

Deno.test("the mcp-bridge keys are the operator's: a caller setting one is refused", () => {
  for (
    const key of [
      "mcp-bridge-transport",
      "mcp-bridge-host",
      "mcp-bridge-port",
      "mcp-public-url",
    ]
  ) {
    assert.throws(
      () =>
        resolveCallerConfig({
          allowCustomCommands: true,
          allowEnvNames: [],
          runDefaults: { provider: "codex", workspace: "/srv/w" },
        }, { [key]: "http" }),
      (error) =>
        error instanceof RunnerError && error.code === "http.forbidden" &&
        error.message.includes("operator"),
    );
  }
});

Deno.test("runs with mcp-bridge-transport=http share the bridge address, each by its own token, and get the public URL", async () => {
  const logs: Record<string, unknown>[] = [];
  const hook = createAssetsHook({ log: (entry) => logs.push(entry) });
  const port = freePort();
  const bound = `http://127.0.0.1:${port}/mcp`;
  const publicUrl = "https://runner.example/langbot/mcp";
  const config: RunConfig = parseRunConfig({
    ...REMOTE,
    "mcp-bridge-transport": "http",
    "mcp-bridge-port": port,
    "mcp-public-url": publicUrl,
  });
  const prepare = (runId: string) =>
    hook.prepare({
      runId,
      request: { input: { text: `hello from ${runId}` }, config },
    });
  const first = await prepare("run-a");
  const second = await prepare("run-b");
  try {
    // Nothing for the location to forward with ssh -R.
    assert.deepEqual(first.mcpServers, []);
    const [entryA] = first.sessionMcpServers!({ http: true });
    const [entryB] = second.sessionMcpServers!({ http: true });
    for (const entry of [entryA, entryB]) {
      assert.ok("url" in entry);
      assert.equal(entry.url, publicUrl);
      assert.equal(entry.name, "langbot_assets");
    }
    const headerOf = (entry: typeof entryA) =>
      Object.fromEntries(
        ("headers" in entry ? entry.headers : []).map((h) => [h.name, h.value]),
      );
    const tokenA = headerOf(entryA);
    const tokenB = headerOf(entryB);
    assert.notEqual(tokenA.Authorization, tokenB.Authorization);
    assert.ok(!publicUrl.includes(tokenA.Authorization.slice(7)));
    // Without MCP over HTTP a remote agent cannot use the stdio bridge.
    assert.deepEqual(first.sessionMcpServers!({}), []);

    const eventA = await callTool(bound, "langbot_get_current_event", {}, {
      authorization: tokenA.Authorization,
    });
    assert.match(JSON.stringify(eventA.structuredContent), /hello from run-a/);
    const eventB = await callTool(bound, "langbot_get_current_event", {}, {
      authorization: tokenB.Authorization,
    });
    assert.match(JSON.stringify(eventB.structuredContent), /hello from run-b/);

    first.release();
    const revoked = await postMcp(
      bound,
      { jsonrpc: "2.0", id: 1, method: "tools/list" },
      { authorization: tokenA.Authorization },
    );
    assert.equal(revoked.status, 401);
    const alive = await postMcp(
      bound,
      { jsonrpc: "2.0", id: 2, method: "tools/list" },
      { authorization: tokenB.Authorization },
    );
    assert.equal(alive.status, 200);
    const anonymous = await postMcp(bound, {
      jsonrpc: "2.0",
      id: 3,
      method: "tools/list",
    });
    assert.equal(anonymous.status, 401);
    assert.ok(
      !JSON.stringify(logs).includes(tokenB.Authorization.slice(7)),
      "a token reached the log",
    );
  } finally {
    first.release();
    second.release();
    await hook.close();
  }
});
