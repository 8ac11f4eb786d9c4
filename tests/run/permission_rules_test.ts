/**
 * Permission rules (`permission-rules-json`) through `runner run` and
 * `runner serve` with the fixture agent: the first matching rule decides a
 * permission request or an `fs/write_text_file`, `permission-decision` the
 * rest, and each `permission.decided` names the rule; a caller's rules may
 * only be stricter than the operator's policy.
 *
 * @module
 */

import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { globPattern } from "../../lib/run/permission_rules.ts";
import { fixtureCommand, runJsonEvents, tempDir } from "../helpers.ts";
import {
  fixtureConfig,
  postJson,
  sseEvents,
  withServe,
} from "../serve_test_helpers.ts";

/** Quoted for the shell-word split of acp-command. */
const quoted = (value: unknown) => `'${JSON.stringify(value)}'`;

const CALLS = quoted([
  { kind: "execute", title: "Run rm -rf build" },
  { kind: "read", title: "Read src/a.ts", path: "src/a.ts" },
  { kind: "edit", title: "Edit secrets/key.pem", path: "secrets/key.pem" },
  { kind: "edit", title: "Edit src/b.ts", path: "src/b.ts" },
]);

const RULES = JSON.stringify([
  { kind: "execute", decision: "reject" },
  { kind: ["read", "search"], decision: "allow" },
  { path: "secrets/**", decision: "reject_always" },
]);

function decided(events: Record<string, unknown>[]) {
  return events.filter((e) => e.type === "permission.decided").map((e) =>
    e.data as Record<string, unknown>
  );
}

Deno.test("globs: ** crosses directories, * and ? do not", () => {
  assert.ok(globPattern("secrets/**").test("secrets/a/b.pem"));
  assert.ok(globPattern("**/*.pem").test("key.pem"));
  assert.ok(globPattern("**/*.pem").test("a/b/key.pem"));
  assert.ok(!globPattern("src/*.ts").test("src/a/b.ts"));
  assert.ok(globPattern("Run *").test("Run rm -rf build"));
  assert.ok(!globPattern("src/?.ts").test("src/ab.ts"));
});

Deno.test("runner run: the first matching rule decides each request, permission-decision the rest, and the event names the rule", async () => {
  const workspace = join(tempDir(), "ws");
  Deno.mkdirSync(join(workspace, "secrets"), { recursive: true });
  Deno.mkdirSync(join(workspace, "src"), { recursive: true });
  const events = await runJsonEvents([
    "run",
    "custom",
    "--acp-command",
    fixtureCommand(
      "--permission-calls",
      CALLS,
      "--fs-write",
      "secrets/x.pem",
      "--fs-write",
      "src/ok.ts",
    ),
    "--workspace",
    workspace,
    "--data-dir",
    tempDir(),
    "--fs-write",
    "true",
    "--permission-decision",
    "allow_always",
    "--permission-rules-json",
    RULES,
    "--langbot-assets-enabled",
    "false",
    "--json",
    "go",
  ]);
  const [run, read, secret, edit, writeSecret, writeOk] = decided(events);
  assert.deepEqual([run.decision, run.rule], ["reject_once", 0]);
  assert.deepEqual([read.decision, read.rule], ["allow_once", 1]);
  assert.deepEqual([secret.decision, secret.rule], ["reject_always", 2]);
  assert.deepEqual([edit.decision, edit.rule], ["allow_always", "default"]);
  assert.deepEqual(
    [writeSecret.path, writeSecret.decision, writeSecret.rule],
    ["secrets/x.pem", "reject_always", 2],
  );
  assert.deepEqual(
    [writeOk.path, writeOk.decision, writeOk.rule],
    ["src/ok.ts", "allow_always", "default"],
  );
  const text = String(
    (events.find((e) => e.type === "message.completed")!.data as {
      message: { content: string };
    }).message.content,
  );
  assert.match(text, /^permission Run rm -rf build: reject_once$/m);
  assert.match(text, /^permission Read src\/a\.ts: allow_once$/m);
  assert.match(text, /^fs-write secrets\/x\.pem: error .*permission rules/m);
  assert.match(text, /^fs-write src\/ok\.ts: ok$/m);
  assert.ok(!existsSync(join(workspace, "secrets", "x.pem")));
});

Deno.test("runner serve: operator rules hold; a caller may not replace them or add looser ones", async () => {
  const args = [
    "--allow-custom-commands",
    "--permission-rules-json",
    JSON.stringify([{ kind: "execute", decision: "reject" }]),
  ];
  await withServe({ args }, async (serve, dir) => {
    const config = fixtureConfig(join(dir, "ws"), [
      "--permission-calls",
      // agentCommand quotes its words itself.
      JSON.stringify([{ kind: "execute", title: "Run make" }]),
    ]);
    const replaced = await postJson(`${serve.url}/v1/runs`, {
      input: { text: "go" },
      config: {
        ...config,
        "permission-rules-json": [{ kind: "execute", decision: "allow" }],
      },
    });
    assert.equal(replaced.status, 403);
    assert.match(
      (await replaced.json()).error.message,
      /^permission-rules-json: the server has permission rules of its own/,
    );
    const ran = await postJson(`${serve.url}/v1/runs`, {
      input: { text: "go" },
      config,
    });
    const events = await sseEvents(ran) as unknown as Record<string, unknown>[];
    const [only] = decided(events);
    assert.deepEqual([only.decision, only.rule], ["reject_once", 0]);
  });
  await withServe({
    args: ["--allow-custom-commands", "--permission-decision", "ask"],
  }, async (serve, dir) => {
    const looser = await postJson(`${serve.url}/v1/runs`, {
      input: { text: "go" },
      config: {
        ...fixtureConfig(join(dir, "ws")),
        "permission-rules-json": [{ kind: "read", decision: "allow" }],
      },
    });
    assert.equal(looser.status, 403);
    assert.match(
      (await looser.json()).error.message,
      /^permission-rules-json: rule 0 decides allow, looser than the server's ask/,
    );
  });
});

Deno.test("runner serve: a rule that says ask sends the request to a person, and both events name the rule", async () => {
  await withServe({ args: ["--allow-custom-commands"] }, async (serve, dir) => {
    const response = await postJson(`${serve.url}/v1/runs`, {
      input: { text: "go" },
      config: {
        ...fixtureConfig(join(dir, "ws"), ["--permission"]),
        "permission-rules-json": [{ kind: "edit", decision: "ask" }],
        "permission-timeout": 1,
        "permission-fallback": "reject_always",
      },
    });
    assert.equal(response.status, 200);
    const events = await sseEvents(response);
    const requested = events.find((e) => e.type === "permission.requested")!;
    assert.equal(requested.data.rule, 0);
    const [only] = decided(events as unknown as Record<string, unknown>[]);
    assert.deepEqual([only.by, only.decision, only.rule], [
      "timeout",
      "reject_always",
      0,
    ]);
  });
});
