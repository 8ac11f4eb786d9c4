import assert from "node:assert/strict";
import { RunnerError } from "../../lib/errors.ts";
import { parseMcpServersJson } from "../../lib/assets/mcp_servers_json.ts";
import { runScopeNote } from "../../lib/assets/run_scope.ts";
import { startAssetGateway } from "../../lib/assets/bridge.ts";
import { sampleSpec } from "../assets_test_helpers.ts";

const ALL = { http: true, sse: true };

function refusal(text: string, caps = ALL): RunnerError {
  try {
    parseMcpServersJson(text, caps);
  } catch (error) {
    assert.ok(error instanceof RunnerError);
    assert.equal(error.code, "config.invalid");
    return error;
  }
  throw new Error(`accepted ${text}`);
}

Deno.test("runScopeNote names the run and its assets, never a token", async () => {
  const gateway = await startAssetGateway({ ttlMs: 60_000 });
  try {
    const spec = sampleSpec("run-42");
    const { token } = gateway.register(spec);
    const note = runScopeNote(spec, "run-42");
    assert.ok(!note.includes(token));
    assert.match(
      note,
      /Run id run-42 \(for diagnostics only; never pass it to tools\)/,
    );
    assert.match(note, /langbot_\* tools of the "langbot_assets" MCP server/);
    assert.match(note, /conversation history: langbot_history_page/);
    assert.match(
      note,
      /knowledge bases \(langbot_retrieve_knowledge\): kb-docs \(Docs\)\n/,
    );
    assert.match(
      note,
      /tools \(langbot_get_tool_detail, langbot_call_tool\): weather, echo, detail_only/,
    );
    assert.match(note, /platform actions \(langbot_call_tool\): send_message/);
    assert.match(note, /do not add run_id/);
    const bare = runScopeNote({ runId: "r", grant: {} }, "r");
    assert.match(bare, /conversation history: not available in this run/);
    assert.match(bare, /knowledge bases \(langbot_retrieve_knowledge\): none/);
  } finally {
    await gateway.close();
  }
});

Deno.test("parseMcpServersJson: array and mcpServers forms become ACP entries", () => {
  assert.deepEqual(parseMcpServersJson("  ", ALL), []);
  assert.deepEqual(
    parseMcpServersJson(
      JSON.stringify([
        {
          name: "fs",
          command: "npx",
          args: ["-y", "server-fs"],
          env: { ROOT: "/tmp" },
        },
        { name: "git", command: "mcp-git", env: [{ name: "A", value: "1" }] },
        {
          type: "http",
          name: "search",
          url: "https://s.example/mcp",
          headers: { "X-Key": "k" },
        },
        { type: "sse", name: "old", url: "http://127.0.0.1:9/sse" },
      ]),
      ALL,
    ),
    [
      {
        name: "fs",
        command: "npx",
        args: ["-y", "server-fs"],
        env: [{ name: "ROOT", value: "/tmp" }],
      },
      {
        name: "git",
        command: "mcp-git",
        args: [],
        env: [{ name: "A", value: "1" }],
      },
      {
        type: "http",
        name: "search",
        url: "https://s.example/mcp",
        headers: [{ name: "X-Key", value: "k" }],
      },
      { type: "sse", name: "old", url: "http://127.0.0.1:9/sse", headers: [] },
    ],
  );
  assert.deepEqual(
    parseMcpServersJson(
      JSON.stringify({
        mcpServers: {
          fs: { command: "fs-server" },
          web: { type: "http", url: "http://h/mcp" },
        },
      }),
      { http: true, sse: false },
    ),
    [
      { name: "fs", command: "fs-server", args: [], env: [] },
      { type: "http", name: "web", url: "http://h/mcp", headers: [] },
    ],
  );
});

Deno.test("parseMcpServersJson: each bad entry is named in one config.invalid error", () => {
  assert.match(
    refusal("[nope").message,
    /mcp-servers-json is invalid: it is not valid JSON/,
  );
  assert.match(
    refusal('{"servers": []}').message,
    /JSON array of servers or \{"mcpServers"/,
  );
  const error = refusal(JSON.stringify([
    { name: "a", command: "" },
    { name: "b", command: "x", args: "not-a-list" },
    { name: "c", command: "x", env: { TOKEN: 5 } },
    { name: "d", url: "http://h/mcp" },
    { type: "http", name: "e", url: "ftp://h" },
    { name: "f", command: "x", disabled: true },
    { name: "a", command: "y" },
    { name: "langbot_assets", command: "z" },
    "string",
    { command: "x" },
  ]));
  assert.deepEqual(error.detail?.problems, [
    'entry 1 ("a"): command must be a non-empty string',
    'entry 2 ("b"): args must be a list of strings',
    'entry 3 ("c"): env "TOKEN" must have a string value',
    'entry 4 ("d"): needs "command" (stdio) or "type": "http"/"sse" with "url"',
    'entry 5 ("e"): url must be an http:// or https:// URL',
    'entry 6 ("f"): unknown field(s) disabled for a stdio server (allowed: name, type, command, args, env)',
    'entry 7 ("a"): the name is used twice',
    'entry 8 ("langbot_assets"): the name langbot_assets is reserved for LangBot assets',
    "entry 9: must be an object",
    "entry 10: name must be a non-empty string",
  ]);
  const noHttp = refusal(
    JSON.stringify([{
      type: "http",
      name: "web",
      url: "http://h/mcp",
      headers: { Authorization: "secret-value" },
    }]),
    { http: false, sse: false },
  );
  assert.match(
    noHttp.message,
    /does not support http MCP servers \(mcpCapabilities\.http is false\)/,
  );
  assert.ok(!noHttp.message.includes("secret-value"));
  assert.match(
    refusal(JSON.stringify([{ type: "sse", name: "s", url: "http://h" }]), {
      http: true,
      sse: false,
    }).message,
    /mcpCapabilities\.sse/,
  );
});
