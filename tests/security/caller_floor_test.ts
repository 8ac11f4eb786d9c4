/**
 * The attacker caller: every key that widens access, sent through every
 * entrance of `runner serve` (`POST /v1/runs`, a follow-up in the same
 * conversation, the n8n webhook's query and body, remembered conversation
 * settings), is refused or held to the operator's floor, and a refused
 * request starts nothing. Issue 35, breaks 3, 6 and 7.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { RunnerError } from "../../lib/errors.ts";
import { resolveCallerConfig } from "../../lib/server/policy.ts";
import { agentCommand, entryExists, tempDir } from "../helpers.ts";
import { confinedFixtureCommand, DENO_DIR } from "../sandbox_helpers.ts";
import { ROOT } from "../helpers.ts";
import {
  postJson,
  type ServeProcess,
  sseEvents,
  startServe,
} from "../serve_test_helpers.ts";
import type { RunEvent } from "../../lib/events.ts";

const TOKEN = "floor-test-token-" + crypto.randomUUID();
const AUTH = { authorization: `Bearer ${TOKEN}` };

/** An operator's run defaults for the policy-level attacks. */
function operatorServe(
  runDefaults: Record<string, unknown>,
  dataDir = tempDir(),
) {
  return {
    allowCustomCommands: false,
    allowEnvNames: [],
    dataDir,
    runDefaults: { provider: "codex", ...runDefaults },
  };
}

function refusal(
  serve: ReturnType<typeof operatorServe>,
  caller: Record<string, unknown>,
): { code: string; key?: unknown } | undefined {
  try {
    resolveCallerConfig(serve, caller);
    return undefined;
  } catch (error) {
    assert.ok(error instanceof RunnerError, String(error));
    return { code: error.code, key: error.detail?.key };
  }
}

Deno.test("every widening key is refused by the one floor, naming the key", () => {
  const roots = tempDir("roots-");
  const workspace = join(roots, "default");
  Deno.mkdirSync(workspace);
  const dataDir = tempDir("data-");
  const outside = tempDir("outside-");
  const toData = join(workspace, "to-data");
  Deno.symlinkSync(dataDir, toData);
  const toRoot = join(workspace, "to-root");
  Deno.symlinkSync("/", toRoot);
  const home = Deno.env.get("HOME")!;
  const strict = operatorServe({
    workspace,
    "workspace-roots": roots,
    sandbox: "confined",
    "sandbox-network": "none",
    "langbot-assets-enabled": false,
    "permission-decision": "ask",
    "session-config-json": { effort: "low" },
  }, dataDir);
  const pinned = operatorServe({ workspace, mode: "plan", model: "fast" });
  const attacks: Array<[typeof strict, Record<string, unknown>, string]> = [
    [strict, { "session-cwd": "/" }, "session-cwd"],
    [strict, { "session-cwd": `${workspace}/../..` }, "session-cwd"],
    [strict, { "session-cwd": toRoot }, "session-cwd"],
    [strict, { "session-cwd": outside }, "session-cwd"],
    [strict, { "fs-read": true }, "fs-read"],
    [strict, { "fs-write": true }, "fs-write"],
    [strict, { "fs-read": true, "fs-write": true, "session-cwd": "/" }, ""],
    [strict, { mode: "bypassPermissions" }, "mode"],
    [strict, { "session-config-json": { mode: "bypassPermissions" } }, ""],
    [strict, { "session-config-json": { effort: "high" } }, ""],
    [strict, { "session-config-json": { approval: "never" } }, ""],
    [pinned, { mode: "bypassPermissions" }, "mode"],
    [pinned, { mode: "default" }, "mode"],
    [pinned, { model: "big" }, "model"],
    [pinned, { "session-config-json": { mode: "yolo" } }, ""],
    [strict, { workspace: dataDir }, "workspace"],
    [strict, { workspace: join(dataDir, "inside") }, "workspace"],
    [strict, { workspace: home }, "workspace"],
    [strict, { workspace: "/" }, "workspace"],
    [strict, { workspace: "/root/x" }, "workspace"],
    [strict, { workspace: outside }, "workspace"],
    [strict, { workspace: toData }, "workspace"],
    [strict, { workspace: join(toData, "x") }, "workspace"],
    [strict, { workspace: `${roots}/../${outside.split("/").pop()}` }, ""],
    [strict, { workspace: "../x" }, ""],
    [strict, { workspace: ROOT }, "workspace"],
    [strict, { sandbox: "off" }, "sandbox"],
    [strict, { "sandbox-network": "full" }, "sandbox-network"],
    [
      operatorServe({ sandbox: "confined" }),
      { workspace: outside },
      "workspace",
    ],
  ];
  // Roots that hold the runner's own places never open them.
  const wide = operatorServe({ "workspace-roots": ["/"] }, dataDir);
  const unset = operatorServe({}, dataDir);
  for (const serve of [wide, unset]) {
    attacks.push(
      [serve, { workspace: dataDir }, "workspace"],
      [serve, { workspace: join(dataDir, "store") }, "workspace"],
      [serve, { workspace: toData }, "workspace"],
      [serve, { workspace: home }, "workspace"],
      [serve, { workspace: "~" }, "workspace"],
      [serve, { workspace: "/" }, "workspace"],
      [serve, { workspace: toRoot }, "workspace"],
      [serve, { workspace: join(dataDir, "..") }, ""],
      [serve, { workspace: ROOT }, "workspace"],
    );
  }
  for (const [serve, caller, key] of attacks) {
    const got = refusal(serve, caller);
    assert.ok(got, `accepted: ${JSON.stringify(caller)}`);
    assert.ok(
      ["http.forbidden", "config.invalid"].includes(got.code),
      JSON.stringify({ caller, got }),
    );
    if (key) assert.equal(got.key, key, JSON.stringify({ caller, got }));
  }
  // What stays allowed: inside the roots, narrower, the operator's own values.
  const inRoots = join(roots, "conversation-1");
  const allowed = resolveCallerConfig(strict, {
    workspace: inRoots,
    "session-cwd": join(inRoots, "sub"),
    "fs-read": false,
    "session-config-json": { effort: "low" },
  });
  assert.equal(allowed.workspace, inRoots);
  assert.deepEqual(allowed.sessionConfigJson, { effort: "low" });
  const chosen = operatorServe({
    workspace,
    mode: "plan",
    "caller-modes": "default",
    "caller-session-config-keys": "verbose",
    "session-config-json": { effort: "low" },
  });
  const merged = resolveCallerConfig(chosen, {
    mode: "default",
    "session-config-json": { verbose: "true" },
  });
  assert.equal(merged.mode, "default");
  assert.deepEqual(merged.sessionConfigJson, {
    effort: "low",
    verbose: "true",
  });
});

/** A strict operator: confined, no network, workspace roots, fs-read on, `ask`. */
async function strictServe(world: {
  roots: string;
  workspace: string;
  record: string;
  hostSecret: string;
  dataDir: string;
}): Promise<ServeProcess> {
  return await startServe({
    dataDir: world.dataDir,
    env: { RUNNER_API_TOKEN: TOKEN },
    args: [
      ...["--provider", "custom"],
      ...["--workspace", world.workspace, "--workspace-roots", world.roots],
      ...["--sandbox", "confined", "--sandbox-network", "none"],
      ...["--langbot-assets-enabled", "false"],
      ...["--sandbox-read-paths", `${ROOT},${DENO_DIR}`],
      ...["--sandbox-write-paths", join(world.record, "..")],
      ...["--fs-read", "true", "--permission-decision", "ask"],
      ...["--env-json", JSON.stringify({ DENO_DIR })],
      ...["--acp-command", fixtureLine(world)],
    ],
  });
}

function fixtureLine(
  world: { record: string; hostSecret: string; workspace: string },
): string {
  return confinedFixtureCommand(
    ...["--record", world.record],
    ...["--fs-read", world.hostSecret, "--try-read", world.hostSecret],
    ...["--fs-read", join(world.workspace, "inside.txt")],
  );
}

async function refusedWith(response: Response, key: string): Promise<void> {
  const body = await response.json();
  assert.equal(response.status, 403, JSON.stringify(body));
  assert.equal(body.error.code, "http.forbidden", JSON.stringify(body));
  assert.match(body.error.message, new RegExp(`^${key}:`));
}

Deno.test("an attacker caller gets nothing through POST /v1/runs, a follow-up or the n8n webhook, and an allowed run's agent still cannot read the host's file", async () => {
  const roots = tempDir("roots-");
  const workspace = join(roots, "default");
  Deno.mkdirSync(workspace);
  Deno.writeTextFileSync(join(workspace, "inside.txt"), "inside text");
  const hostDir = tempDir("host-");
  const hostSecret = join(hostDir, "shadow");
  Deno.writeTextFileSync(hostSecret, "host-secret-value");
  const record = join(tempDir("record-"), "agent.jsonl");
  const dataDir = tempDir("data-");
  const link = join(workspace, "escape");
  Deno.symlinkSync("/", link);
  const serve = await strictServe({
    roots,
    workspace,
    record,
    hostSecret,
    dataDir,
  });
  try {
    const attacks: Array<[Record<string, unknown>, string]> = [
      [{ "fs-read": true, "fs-write": true, "session-cwd": "/" }, "fs-write"],
      [{ "session-cwd": "/" }, "session-cwd"],
      [{ "session-cwd": link }, "session-cwd"],
      [{ mode: "bypassPermissions" }, "mode"],
      [
        { "session-config-json": { mode: "bypassPermissions" } },
        "session-config-json",
      ],
      [{ workspace: dataDir }, "workspace"],
      [{ workspace: "/" }, "workspace"],
      [{ workspace: hostDir }, "workspace"],
      [{ sandbox: "off" }, "sandbox"],
      [{ "sandbox-network": "full" }, "sandbox-network"],
    ];
    for (const [config, key] of attacks) {
      const response = await postJson(`${serve.url}/v1/runs`, {
        input: { text: "attack" },
        config,
      }, AUTH);
      await refusedWith(response, key);
      // The n8n webhook's query is the same floor.
      const query = new URLSearchParams(
        Object.entries(config).map((
          [name, value],
        ) => [name, typeof value === "string" ? value : JSON.stringify(value)]),
      );
      const n8n = await postJson(
        `${serve.url}/v1/webhooks/n8n?${query}`,
        { chatInput: "attack", conversation_id: "n8n-attack" },
        AUTH,
      );
      await refusedWith(n8n, key);
    }
    assert.ok(!entryExists(record), "a refused request spawned the agent");
    const listed = await (await fetch(`${serve.url}/v1/runs`, {
      headers: AUTH,
    })).json();
    assert.deepEqual(listed.runs, [], "a refused request stored a run");

    // An allowed run: the agent's fs/* and its own reads stay in the workspace.
    const allowed = await postJson(`${serve.url}/v1/runs`, {
      input: { text: "read" },
      conversation_id: "c-floor",
      config: { "session-cwd": workspace },
    }, AUTH);
    const events = await sseEvents(allowed);
    const wire = JSON.stringify(events);
    assert.equal(events.at(-1)?.type, "run.completed", wire);
    assert.ok(entryExists(record), "the allowed run's agent did not start");
    assert.match(wire, /inside\.txt: inside text/);
    assert.match(wire, new RegExp(`fs-read ${hostSecret}: error`));
    assert.match(wire, new RegExp(`try-read ${hostSecret}: error NotFound`));
    assert.doesNotMatch(wire, /host-secret-value/);

    // A follow-up in the same conversation carries the same floor.
    const followUp = await postJson(`${serve.url}/v1/runs`, {
      input: { text: "again" },
      conversation_id: "c-floor",
      config: { "session-cwd": "/", mode: "bypassPermissions" },
    }, AUTH);
    await refusedWith(followUp, "session-cwd");

    // The webhook's body carries no run config: its keys change nothing.
    const body = await postJson(`${serve.url}/v1/webhooks/n8n?stream=false`, {
      chatInput: "body attack",
      "session-cwd": "/",
      session_cwd: "/",
      config: { "session-cwd": "/", workspace: "/" },
    }, AUTH);
    const answer = JSON.stringify(await body.json());
    assert.equal(body.status, 200, answer);
    assert.match(answer, new RegExp(`fs-read ${hostSecret}: error`));
    assert.doesNotMatch(answer, /host-secret-value/);
  } finally {
    await serve.stop();
  }
});

function configured(events: RunEvent[]): Record<string, unknown>[] {
  return events.filter((event) => event.type === "session.configured")
    .map((event) => event.data as Record<string, unknown>);
}

Deno.test("remembered settings from an earlier allowed run do not escape a stricter operator's floor", async () => {
  const dataDir = tempDir("data-");
  const workspace = tempDir("ws-");
  const acp = agentCommand([
    ...["--session-config", "both", "--load-session"],
    ...["--state-dir", tempDir("state-")],
  ]);
  const run = async (serve: ServeProcess, config: Record<string, unknown>) => {
    const response = await postJson(`${serve.url}/v1/runs`, {
      input: { text: "hi" },
      conversation_id: "c-remembered",
      config,
    }, AUTH);
    const events = await sseEvents(response);
    assert.equal(events.at(-1)?.type, "run.completed", JSON.stringify(events));
    return events;
  };
  const base = ["--provider", "custom", "--workspace", workspace];
  const loose = await startServe({
    dataDir,
    env: { RUNNER_API_TOKEN: TOKEN },
    args: [...base, "--acp-command", acp],
  });
  try {
    const first = await run(loose, {
      mode: "acceptEdits",
      "session-config-json": { effort: "high" },
    });
    assert.equal(configured(first)[0].mode, "acceptEdits");
  } finally {
    await loose.stop();
  }
  const strict = await startServe({
    dataDir,
    env: { RUNNER_API_TOKEN: TOKEN },
    args: [...base, "--acp-command", acp, "--permission-decision", "ask"],
  });
  try {
    const refused = await postJson(`${strict.url}/v1/runs`, {
      input: { text: "hi" },
      conversation_id: "c-remembered",
      config: { mode: "acceptEdits" },
    }, AUTH);
    await refusedWith(refused, "mode");
    const second = configured(await run(strict, {}));
    const wire = JSON.stringify(second);
    assert.notEqual(second[0]?.mode, "acceptEdits", wire);
    assert.ok(
      !((second[0]?.remembered as string[] | undefined) ?? []).length,
      wire,
    );
    assert.notEqual(
      (second[0]?.config as Record<string, unknown> | undefined)?.effort,
      "high",
      wire,
    );
  } finally {
    await strict.stop();
  }
});

Deno.test("a caller cannot name an ACP registry agent the operator did not choose: it would install and run a program nobody picked", () => {
  const workspace = tempDir("registry-ws-");
  const serve = operatorServe({ workspace });
  for (const provider of ["some-registry-agent", "registry:codex"]) {
    assert.deepEqual(refusal(serve, { provider }), {
      code: "http.forbidden",
      key: "provider",
    }, provider);
  }
  // A preset, and the operator's own registry agent, stay the caller's to name.
  assert.equal(refusal(serve, { provider: "claude-code" }), undefined);
  const chosen = operatorServe({ provider: "some-registry-agent", workspace });
  assert.equal(refusal(chosen, { provider: "some-registry-agent" }), undefined);
  assert.deepEqual(refusal(chosen, { provider: "other-registry-agent" }), {
    code: "http.forbidden",
    key: "provider",
  });
  // Under --allow-custom-commands the operator lets callers pick commands.
  assert.equal(
    refusal({ ...serve, allowCustomCommands: true }, {
      provider: "some-registry-agent",
    }),
    undefined,
  );
});
