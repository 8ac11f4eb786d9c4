/**
 * The `run.start` payload in both directions — our hub's, LangBot's and
 * other hubs' shapes mapped onto a local run — and the floors a daemon's own
 * settings put on it: a hub may lower its client terminals and sandbox, never
 * raise them (each key, the hub asking more, the same, less, or nothing), and
 * only the daemon names sandbox paths.
 *
 * @module
 */

import assert from "node:assert/strict";
import { parseRunConfig } from "../../lib/config.ts";
import { RunnerError } from "../../lib/errors.ts";
import type { JsonObject } from "../../lib/relay.ts";
import { buildRunStartPayload, mapRunStart } from "../../lib/relay/payload.ts";
import { hubRunStart, hubRunStartConfig } from "../daemon_test_helpers.ts";

const MAP_OPTIONS = {
  jobId: "job-1",
  fallbackCwd: "/srv/daemon",
  home: "/home/al",
};

function plan(
  config: Record<string, unknown>,
  own: { clientTerminals: boolean; terminalTimeout: number },
) {
  return mapRunStart(
    { input: { text: "hi" }, config: { provider: "codex", ...config } },
    { ...MAP_OPTIONS, terminals: own },
  ).config;
}

Deno.test("a hub's terminal-timeout is capped at the daemon's own: asking more, the same or nothing gets the daemon's; less gets less", () => {
  const own = { clientTerminals: true, terminalTimeout: 30 };
  for (const asked of [31, 600, 15_000]) {
    assert.equal(
      plan({ client_terminals: true, terminal_timeout: asked }, own)
        .terminalTimeout,
      30,
      `asked ${asked}`,
    );
  }
  assert.equal(
    plan({ client_terminals: true, terminal_timeout: 30 }, own)
      .terminalTimeout,
    30,
  );
  assert.equal(
    plan({ client_terminals: true, terminal_timeout: 2 }, own).terminalTimeout,
    2,
  );
  assert.equal(plan({ client_terminals: true }, own).terminalTimeout, 30);
});

Deno.test("a hub turns a daemon's client terminals off, never on", () => {
  for (
    const [asked, mine, expected] of [
      [true, true, true],
      [
        true,
        false,
        false,
      ],
      [false, true, false],
      [false, false, false],
    ]
  ) {
    assert.equal(
      plan({ client_terminals: asked }, {
        clientTerminals: mine,
        terminalTimeout: 30,
      }).clientTerminals,
      expected,
      `hub ${asked}, daemon ${mine}`,
    );
  }
});

/** The daemon's own sandbox settings, with paths of its own. */
function ownSandbox(
  sandbox: "off" | "confined",
  sandboxNetwork: "none" | "full" | "host",
) {
  return {
    sandbox,
    sandboxNetwork,
    sandboxReadPaths: ["/opt/tools"],
    sandboxWritePaths: ["/srv/cache"],
  };
}

function sandboxed(
  config: Record<string, unknown>,
  own?: ReturnType<typeof ownSandbox>,
) {
  return mapRunStart(
    {
      input: { text: "hi" },
      config: { provider: "codex", langbot_assets_enabled: false, ...config },
    },
    { ...MAP_OPTIONS, ...(own ? { sandbox: own } : {}) },
  ).config;
}

Deno.test("a daemon's own sandbox=confined holds whatever the hub asks: off, confined or nothing", () => {
  for (const asked of [{ sandbox: "off" }, { sandbox: "confined" }, {}]) {
    assert.equal(
      sandboxed(asked, ownSandbox("confined", "host")).sandbox,
      "confined",
      JSON.stringify(asked),
    );
  }
});

Deno.test("a daemon that does not require the sandbox takes the hub's: confined stays confined, off or nothing is off", () => {
  for (const own of [ownSandbox("off", "none"), undefined]) {
    assert.equal(sandboxed({ sandbox: "confined" }, own).sandbox, "confined");
    assert.equal(sandboxed({ sandbox: "off" }, own).sandbox, "off");
    assert.equal(sandboxed({}, own).sandbox, "off");
  }
});

Deno.test("a confined daemon's network is a ceiling: the hub may ask less or the same, never more (none < full < host)", () => {
  const cases: [string, string | undefined, string][] = [
    // [daemon's own, hub asks (undefined: nothing), the job gets]
    ["none", "none", "none"],
    ["none", "full", "none"],
    ["none", "host", "none"],
    ["none", undefined, "none"],
    ["full", "none", "none"],
    ["full", "full", "full"],
    ["full", "host", "full"],
    ["full", undefined, "full"],
    ["host", "none", "none"],
    ["host", "full", "full"],
    ["host", "host", "host"],
    ["host", undefined, "full"],
  ];
  for (const [mine, asked, expected] of cases) {
    const config = sandboxed(
      asked === undefined ? {} : { sandbox_network: asked },
      ownSandbox("confined", mine as "none" | "full" | "host"),
    );
    assert.equal(
      config.sandboxNetwork,
      expected,
      `daemon ${mine}, hub ${asked}`,
    );
  }
});

Deno.test("a daemon that does not require the sandbox takes the hub's network as asked", () => {
  for (const asked of ["none", "full", "host"]) {
    assert.equal(
      sandboxed(
        { sandbox: "confined", sandbox_network: asked },
        ownSandbox("off", "none"),
      ).sandboxNetwork,
      asked,
    );
  }
});

Deno.test("a network no daemon knows is refused with config.invalid, not taken as the daemon's", () => {
  assert.throws(
    () =>
      sandboxed(
        { sandbox_network: "everything" },
        ownSandbox("confined", "none"),
      ),
    (error: unknown) =>
      error instanceof RunnerError && error.code === "config.invalid",
  );
});

Deno.test("sandbox paths come from the daemon alone: the hub's are ignored, with or without the daemon's own", () => {
  const hubPaths = {
    sandbox: "confined",
    sandbox_read_paths: ["/"],
    sandbox_write_paths: ["/home/al/.ssh"],
    "sandbox-write-paths": "/etc",
  };
  const mine = mapRunStart(
    {
      input: { text: "hi" },
      config: { provider: "codex", langbot_assets_enabled: false, ...hubPaths },
    },
    { ...MAP_OPTIONS, sandbox: ownSandbox("confined", "full") },
  );
  assert.deepEqual(mine.config.sandboxReadPaths, ["/opt/tools"]);
  assert.deepEqual(mine.config.sandboxWritePaths, ["/srv/cache"]);
  assert.deepEqual(mine.ignoredKeys, [
    "sandbox_read_paths",
    "sandbox_write_paths",
    "sandbox-write-paths",
  ]);
  const none = sandboxed(hubPaths);
  assert.deepEqual(none.sandboxReadPaths, []);
  assert.deepEqual(none.sandboxWritePaths, []);
});

/** What {@linkcode mapRunStart} returns, from the run.start payload. */
type RunStartPlan = ReturnType<typeof mapRunStart>;

/**
 * Asserts each field `expected` names has that value in `plan` (and each of
 * its `config` in `plan.config`); fields it does not name are not checked.
 */
function assertPlanHas(
  plan: RunStartPlan,
  expected:
    & Partial<Omit<RunStartPlan, "config">>
    & { config?: Partial<RunStartPlan["config"]> },
): void {
  const { config = {}, ...top } = expected;
  for (const [key, value] of Object.entries(top)) {
    assert.deepEqual(plan[key as keyof RunStartPlan], value, key);
  }
  for (const [key, value] of Object.entries(config)) {
    const field = key as keyof RunStartPlan["config"];
    assert.deepEqual(plan.config[field], value, `config.${key}`);
  }
}

Deno.test("the golden transcript's payload maps onto a local run in its cwd, extra keys ignored", () => {
  const plan = mapRunStart({
    run_id: "run-ok-1",
    prompt_text: "List the files",
    input: { text: "List the files", attachments: [] },
    input_text: "List the files",
    config: {
      "daemon-id": "golden-daemon",
      cwd: "/workspace/project",
      model: "",
      "permission-mode": "default",
      timeout: 600,
      provider: "codex",
    },
  }, MAP_OPTIONS);
  assertPlanHas(plan, {
    runId: "run-ok-1",
    sessionCwd: "/workspace/project",
    input: { text: "List the files", attachments: [] },
    ignoredKeys: ["daemon-id", "permission-mode"],
    assetsEnabled: true,
    mcpRequestTimeoutMs: 60_000,
    config: {
      location: "local",
      provider: "codex",
      workspace: "/workspace/project",
      timeout: 600,
    },
  });
});

Deno.test("the plugin's snake_case keys map onto the run config", () => {
  const plan = mapRunStart({
    input: {
      text: "look",
      attachments: [{ type: "image", mime_type: "image/png", content: "AAAA" }],
    },
    config: {
      acp_command: ["my agent", "--acp"],
      workspace: "~/project",
      session_cwd: "/elsewhere",
      env: { API_KEY: "k-123456", EMPTY: null },
      startup_timeout: 5,
      initialize_timeout: 6.5,
      reuse_session: false,
      create_session_if_missing: "false",
      streaming: false,
      permission_decision: "reject_once",
      stored_session_id: "sess-9",
      mcp_servers: [{ name: "extra", command: "x", args: [], env: [] }],
      langbot_assets_enabled: false,
      mcp_request_timeout: 2.5,
    },
  }, MAP_OPTIONS);
  assertPlanHas(plan, {
    runId: "job-1",
    sessionCwd: "/elsewhere",
    storedSessionId: "sess-9",
    config: {
      provider: "custom",
      acpCommand: "'my agent' --acp",
      workspace: "/home/al/project",
      envJson: { API_KEY: "k-123456" },
      startupTimeout: 5,
      initializeTimeout: 6.5,
      reuseSession: false,
      createSessionIfMissing: false,
      streaming: false,
      permissionDecision: "reject_once",
    },
  });
  assert.deepEqual(plan.mcpServers.map((server) => server.name), ["extra"]);
  assert.equal(plan.assetsEnabled, false);
  assert.equal(plan.mcpRequestTimeoutMs, 2500);
  assert.deepEqual(plan.input.attachments, [{
    type: "image",
    mime_type: "image/png",
    name: undefined,
    url: undefined,
    content: "AAAA",
  }]);
});

Deno.test("input.contents become attachments when there are none, as daemon.py maps them", () => {
  const png = "data:image/png;base64,iVBORw0KGgo=";
  const plan = mapRunStart({
    prompt_text: "look",
    input: {
      text: "look",
      contents: [
        { type: "text", text: "look" },
        { type: "image_base64", image_base64: png },
        { type: "image_url", image_url: { url: "https://x.test/cat.jpg" } },
        { type: "file_base64", file_base64: "aGk=", file_name: "a.txt" },
        { type: "file_url", file_url: "https://x.test/b", file_name: "b.pdf" },
      ],
    },
    config: { provider: "codex" },
  }, MAP_OPTIONS);
  assert.deepEqual(plan.input.attachments, [
    { type: "image", name: "image", content: png },
    {
      type: "image",
      name: "image",
      url: "https://x.test/cat.jpg",
      mime_type: "image/jpeg",
    },
    { type: "file", name: "a.txt", content: "aGk=" },
    {
      type: "file",
      name: "b.pdf",
      url: "https://x.test/b",
      mime_type: "application/pdf",
    },
  ]);
  const listed = mapRunStart({
    prompt_text: "look",
    input: {
      attachments: [{
        type: "file",
        file_name: "notes.md",
        content_type: "text/markdown",
        path: "/home/al/notes.md",
        size_bytes: 12,
      }],
      contents: [{ type: "image_base64", image_base64: png }],
    },
    config: { provider: "codex" },
  }, MAP_OPTIONS);
  assert.deepEqual(listed.input.attachments, [{
    type: "file",
    mime_type: "text/markdown",
    name: "notes.md",
    url: undefined,
    content: undefined,
    path: "/home/al/notes.md",
    size: 12,
  }], "attachments win over contents; path and size kept");
});

Deno.test("kebab-case keys are accepted too; no directory falls back to the daemon's", () => {
  const plan = mapRunStart({
    input_text: "hi",
    config: { "acp-command": "agent --acp", "reuse-session": "false" },
  }, MAP_OPTIONS);
  assert.equal(plan.config.acpCommand, "agent --acp");
  assert.equal(plan.config.reuseSession, false);
  assert.equal(plan.config.workspace, "/srv/daemon");
  assert.equal(plan.input.text, "hi");
});

Deno.test("payloads that cannot work are refused with config.invalid", () => {
  const refused = (config: JsonObject) =>
    assert.throws(
      () => mapRunStart({ prompt_text: "x", config }, MAP_OPTIONS),
      (error: unknown) =>
        error instanceof RunnerError && error.code === "config.invalid",
    );
  refused({ cwd: "/w" }); // neither provider nor acp_command
  refused({ provider: "codex", cwd: "relative/dir" });
  refused({ provider: "codex", timeout: "soon" });
  refused({ provider: "codex", acp_command: [1, 2] });
  refused({ provider: "codex", mcp_servers: [{ command: "no name" }] });
  refused({ provider: "codex", mcp_request_timeout: 0 });
});

Deno.test("our hub's payload has the plugin's shape and maps back to the same run", () => {
  const config = parseRunConfig({
    provider: "custom",
    "acp-command": "agent --acp",
    location: "daemon",
    "daemon-id": "laptop",
    workspace: "/Users/al/project",
    "env-json": { TOKEN_X: "secret-value" },
    "reuse-session": "false",
    "fs-read": "true",
    timeout: 90,
  });
  const payload = buildRunStartPayload({
    runId: "r1",
    input: { text: "do it", attachments: [{ url: "https://x/y.png" }] },
    config,
    storedSessionId: "s1",
    reuseSession: true,
  });
  assert.deepEqual(Object.keys(payload), [
    "run_id",
    "prompt_text",
    "input",
    "input_text",
    "config",
  ]);
  assert.deepEqual(Object.keys(payload.config as JsonObject), [
    "provider",
    "acp_command",
    "workspace",
    "cwd",
    "session_cwd",
    "env",
    "timeout",
    "startup_timeout",
    "initialize_timeout",
    "reuse_session",
    "create_session_if_missing",
    "streaming",
    "permission_decision",
    "stored_session_id",
    "mcp_servers",
    "langbot_assets_enabled",
    "mcp_request_timeout",
    "fs_read",
  ]);
  const plan = mapRunStart(JSON.parse(JSON.stringify(payload)), MAP_OPTIONS);
  assert.equal(plan.runId, "r1");
  assert.deepEqual(plan.input.text, "do it");
  assert.equal(plan.input.attachments?.[0].url, "https://x/y.png");
  assertPlanHas(plan, {
    storedSessionId: "s1",
    ignoredKeys: [],
    config: {
      acpCommand: "agent --acp",
      workspace: "/Users/al/project",
      envJson: { TOKEN_X: "secret-value" },
      reuseSession: true,
      fsRead: true,
      timeout: 90,
    },
  });
});

Deno.test("a preset run's run.start carries the preset's command, as LangBot's hub sends it", () => {
  assert.equal(
    hubRunStartConfig({}).acp_command,
    "npx -y @zed-industries/codex-acp@0.16.0",
  );
  assert.equal(
    hubRunStartConfig({ "acp-command": "codex-acp --fast" }).acp_command,
    "codex-acp --fast",
  );
});

Deno.test("a preset's default command from any hub leaves the choice to this daemon's PATH", () => {
  const plan = (command: string) =>
    mapRunStart({
      prompt_text: "hi",
      config: { provider: "codex", acp_command: command, cwd: "/w" },
    }, { jobId: "j", fallbackCwd: "/w" }).config.acpCommand;
  assert.equal(plan("npx -y @zed-industries/codex-acp@0.16.0"), undefined);
  assert.equal(plan("npx -y @zed-industries/codex-acp"), undefined);
  assert.equal(plan("codex-acp"), undefined);
  assert.equal(plan("codex-acp --fast"), "codex-acp --fast");
  assert.equal(plan("  npx  -y\t@zed-industries/codex-acp@0.16.0 "), undefined);
});

/** The `config` of the `run.start` our hub sends for `keys`. */
function hubSends(
  keys: Record<string, unknown>,
  spec: Partial<Parameters<typeof buildRunStartPayload>[0]> = {},
): JsonObject {
  return hubRunStart(keys, spec).config as JsonObject;
}

Deno.test("our hub's run.start names a registry agent (and its version) without a command; a custom command is sent as given", () => {
  const registry = hubSends({
    provider: "npx-agent",
    "provider-version": "1.2.3",
  });
  assert.equal(registry.provider, "npx-agent");
  assert.equal(registry.provider_version, "1.2.3");
  assert.equal("acp_command" in registry, false);
  const custom = hubSends({ provider: "custom", "acp-command": "agent --acp" });
  assert.equal(custom.acp_command, "agent --acp");
  assert.equal("provider_version" in custom, false);
});

Deno.test("our hub's run.start: ask goes to a daemon that confirmed permission.ask, the fallback to one that did not", () => {
  const keys = {
    provider: "codex",
    "permission-decision": "ask",
    "permission-fallback": "allow_always",
  };
  assert.equal(hubSends(keys).permission_decision, "allow_always");
  assert.equal(
    hubSends(keys, { askAllowed: true }).permission_decision,
    "ask",
  );
  assert.equal(
    hubSends({ provider: "codex", "permission-decision": "reject_always" })
      .permission_decision,
    "reject_always",
  );
});

Deno.test("our hub's run.start carries its session, memory, MCP and update settings only when the hub has them", () => {
  const bare = hubSends({ provider: "codex" });
  assert.equal(bare.stored_session_id, null);
  assert.equal("stored_session_config" in bare, false);
  assert.deepEqual(bare.mcp_servers, []);
  assert.equal(bare.mcp_request_timeout, 60);
  assert.equal("session_updates" in bare, false);
  assert.equal(bare.session_cwd, "/w");
  const full = hubSends({ provider: "codex", "session-cwd": "/w/sub" }, {
    storedSessionId: "s1",
    sessionMemory: {},
    mcpServers: [{ name: "x", command: "x", args: [], env: [] }],
    mcpRequestTimeout: 5,
    sessionUpdates: true,
  });
  assert.equal(full.stored_session_id, "s1");
  assert.deepEqual(full.stored_session_config, {});
  assert.deepEqual(full.mcp_servers, [{
    name: "x",
    command: "x",
    args: [],
    env: [],
  }]);
  assert.equal(full.mcp_request_timeout, 5);
  assert.equal(full.session_updates, true);
  assert.equal(full.session_cwd, "/w/sub");
  assert.equal(
    hubSends({ provider: "codex" }, { sessionUpdates: false }).session_updates,
    undefined,
  );
});

Deno.test("our hub's run.start sends the engine's own keys only when they differ from their defaults", () => {
  const bare = hubSends({ provider: "codex" });
  for (
    const key of [
      "terminal_timeout",
      "client_terminals",
      "sandbox",
      "session_config_json",
      "permission_rules_json",
      "secret_env_names",
    ]
  ) {
    assert.equal(key in bare, false, key);
  }
  const emptied = hubSends({
    provider: "codex",
    "session-config-json": {},
    "permission-rules-json": [],
    "secret-env-names": "",
  });
  for (
    const key of [
      "session_config_json",
      "permission_rules_json",
      "secret_env_names",
    ]
  ) {
    assert.equal(key in emptied, false, `${key} given empty`);
  }
  const set = hubSends({
    provider: "codex",
    "client-terminals": "true",
    "terminal-timeout": 30,
    sandbox: "confined",
    "session-config-json": { model: "fast" },
    "permission-rules-json": [{ kind: "read", decision: "allow" }],
  });
  assert.equal(set.client_terminals, true);
  assert.equal(set.terminal_timeout, 30);
  assert.equal(set.sandbox, "confined");
  assert.deepEqual(set.session_config_json, { model: "fast" });
  assert.deepEqual(set.permission_rules_json, [{
    kind: "read",
    decision: "allow",
  }]);
});

Deno.test("our hub's run.start: the run-scope note goes before the prompt, the input as typed, attachments a list", () => {
  const payload = hubRunStart({ provider: "codex" }, {
    input: { text: "do it" },
    promptPrefix: "Scope: this repo",
  });
  assert.equal(payload.prompt_text, "Scope: this repo\n\ndo it");
  assert.equal(payload.input_text, "do it");
  assert.deepEqual(payload.input, { text: "do it", attachments: [] });
  const plain = hubRunStart({ provider: "codex" }, { input: {} });
  assert.equal(plain.prompt_text, "");
  assert.equal(plain.input_text, "");
});

/** Asserts mapping `config` throws `config.invalid` saying `message` of `key`. */
function refusedFor(config: JsonObject, key: string, message: string): void {
  assert.throws(
    () => mapRunStart({ prompt_text: "x", config }, MAP_OPTIONS),
    (error: unknown) => {
      assert.ok(error instanceof RunnerError);
      assert.equal(error.code, "config.invalid");
      assert.equal(error.message, `run.start config ${key}: ${message}`);
      assert.deepEqual(error.detail, { key });
      return true;
    },
    JSON.stringify(config),
  );
}

Deno.test("run.start values a daemon cannot use are refused with config.invalid naming the key and what it must be", () => {
  const codex = { provider: "codex" };
  const seconds = "must be a number of seconds > 0";
  refusedFor(
    { ...codex, mcp_request_timeout: "soon" },
    "mcp_request_timeout",
    seconds,
  );
  refusedFor(
    { ...codex, mcp_request_timeout: -1 },
    "mcp_request_timeout",
    seconds,
  );
  refusedFor(
    { ...codex, mcp_request_timeout: 0 },
    "mcp_request_timeout",
    seconds,
  );
  refusedFor({ ...codex, cwd: 5 }, "cwd", "must be a path string");
  refusedFor(
    { ...codex, "session-cwd": ["/w"] },
    "session_cwd",
    "must be a path string",
  );
  refusedFor(
    { ...codex, acp_command: 7 },
    "acp_command",
    "must be a string or a list of strings",
  );
  refusedFor(
    { ...codex, acp_command: ["agent", 1] },
    "acp_command",
    "a list must hold only strings",
  );
  refusedFor(
    { ...codex, mcp_servers: "[not json" },
    "mcp_servers",
    "is not valid JSON",
  );
  refusedFor(
    { ...codex, mcp_servers: { name: "x" } },
    "mcp_servers",
    "must be a list",
  );
  refusedFor(
    { ...codex, mcp_servers: '{"name":"x"}' },
    "mcp_servers",
    "must be a list",
  );
  const entries = "every entry must be an object with a name";
  refusedFor({ ...codex, mcp_servers: [null] }, "mcp_servers", entries);
  refusedFor({ ...codex, mcp_servers: ["x"] }, "mcp_servers", entries);
  refusedFor({ ...codex, mcp_servers: [{ name: 3 }] }, "mcp_servers", entries);
  refusedFor(
    { ...codex, stored_session_config: ["x"] },
    "stored_session_config",
    "must be an object",
  );
  refusedFor(
    { ...codex, stored_session_config: "plan" },
    "stored_session_config",
    "must be an object",
  );
});

Deno.test("run.start values a daemon reads itself: MCP servers as JSON text, env as text, blank and null values as not given", () => {
  const plan = mapRunStart({
    prompt_text: "x",
    config: {
      provider: "codex",
      cwd: "~",
      mcp_servers: JSON.stringify([{ name: "j", command: "j" }]),
      env: JSON.stringify({ A_KEY: "1" }),
      stored_session_id: "   ",
      session_updates: true,
      daemon_id: null,
      daemon_name: "",
      model: "",
      timeout: null,
    },
  }, MAP_OPTIONS);
  assert.equal(plan.config.workspace, "/home/al");
  assert.deepEqual(plan.mcpServers.map((server) => server.name), ["j"]);
  assert.deepEqual(plan.config.envJson, { A_KEY: "1" });
  assert.equal(plan.storedSessionId, undefined);
  assert.equal(plan.sessionUpdates, true);
  assert.deepEqual(plan.ignoredKeys, []);
  assert.equal(
    plan.config.timeout,
    parseRunConfig({ provider: "codex", workspace: "/w" }).timeout,
  );
  const blank = mapRunStart({
    prompt_text: "x",
    config: {
      provider: "codex",
      cwd: "/w",
      mcp_servers: "  ",
      acp_command: [],
      stored_session_id: 42,
      session_updates: "true",
      env: ["A=1"],
      "env-json": { B_KEY: "2" },
    },
  }, MAP_OPTIONS);
  assert.deepEqual(blank.mcpServers, []);
  assert.equal(blank.config.acpCommand, undefined);
  assert.equal(blank.storedSessionId, undefined);
  assert.equal(blank.sessionUpdates, false);
  assert.deepEqual(blank.config.envJson, { B_KEY: "2" });
  assert.equal(blank.sessionMemory, undefined);
  const none = mapRunStart({
    prompt_text: "x",
    config: { provider: "codex", cwd: "/w" },
  }, MAP_OPTIONS);
  assert.deepEqual(none.mcpServers, []);
  assert.equal(none.sessionUpdates, false);
});

Deno.test("what our hub sends a daemon maps back: registry version, remembered values, MCP settings, live updates", () => {
  const payload = hubRunStart(
    { provider: "npx-agent", "provider-version": "1.2.3" },
    {
      sessionMemory: { model: "fast" },
      mcpRequestTimeout: 7,
      sessionUpdates: true,
    },
  );
  const plan = mapRunStart(JSON.parse(JSON.stringify(payload)), MAP_OPTIONS);
  assert.equal(plan.config.provider, "npx-agent");
  assert.equal(plan.config.providerVersion, "1.2.3");
  assert.deepEqual(plan.sessionMemory, { model: "fast" });
  assert.equal(plan.mcpRequestTimeoutMs, 7000);
  assert.equal(plan.sessionUpdates, true);
  assert.deepEqual(plan.ignoredKeys, []);
});

Deno.test("`~` in a run.start path is the daemon user's home, and only at its start", () => {
  const at = (cwd: string, home?: string) =>
    mapRunStart({ prompt_text: "x", config: { provider: "codex", cwd } }, {
      jobId: "j",
      fallbackCwd: "/srv",
      home,
    }).config.workspace;
  assert.equal(at("~/p", "/home/al"), "/home/al/p");
  assert.equal(at("/w/~/p", "/home/al"), "/w/~/p");
  assert.throws(() => at("~al/p", "/home/al"), /absolute/);
});
