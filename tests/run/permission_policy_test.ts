/**
 * What a person is shown when a client terminal command waits for approval
 * (`permission-decision=ask`): the command's title and every part of its
 * input — program, arguments, variables, cwd — with the run's secrets
 * redacted, through a real `runner serve` and the fixture agent, and on the
 * daemon path, where no recorder redacts again before the frames leave the
 * daemon (so only there a missing redaction shows). What the
 * `permission.decided` event shows is in `tests/cli/cli_terminals_test.ts`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { existsSync } from "node:fs";
import {
  agentCommand,
  fixtureCommand,
  parseJsonLines,
  runCli,
  runJsonEvents,
  tempDir,
} from "../helpers.ts";
import { postDaemonRun, serveWithDaemon } from "../daemon_test_helpers.ts";
import {
  fixtureConfig,
  postJson,
  streamUntil,
  withServe,
} from "../serve_test_helpers.ts";

const SECRET = "Hv3nQw7rTz5pLx9k";

Deno.test("an approval request for a terminal command shows no secret in its title or any part of its input", async () => {
  await withServe({
    args: [
      ...["--allow-custom-commands", "--client-terminals", "true"],
      ...["--env-json", JSON.stringify({ RUN_API_TOKEN: SECRET })],
    ],
  }, async (serve, dir) => {
    const workspace = join(dir, "ws");
    const cwd = `dir-${SECRET}`;
    Deno.mkdirSync(join(workspace, cwd), { recursive: true });
    // The program too is named by a path that holds the secret.
    const tool = join(workspace, cwd, "tool");
    Deno.writeTextFileSync(tool, '#!/bin/sh\necho "$@"\n');
    Deno.chmodSync(tool, 0o755);
    const shown = join(workspace, "dir-[REDACTED]", "tool");
    const call = {
      command: tool,
      args: ["-c", `echo ${SECRET}`],
      env: { PASSED: SECRET },
      cwd: join(workspace, cwd),
    };
    const response = await postJson(`${serve.url}/v1/runs`, {
      input: { text: "go" },
      config: {
        ...fixtureConfig(workspace, ["--terminal", JSON.stringify(call)]),
        "client-terminals": true,
        "permission-decision": "ask",
        "permission-timeout": 30,
        "langbot-assets-enabled": false,
      },
    });
    assert.equal(response.status, 200);
    const { events, messages } = await streamUntil(
      response,
      "permission.requested",
    );
    const requested = events.at(-1)!;
    await messages.return(undefined);
    const toolCall = requested.data.tool_call as Record<string, unknown>;
    // A person is offered to run it or not, for this terminal's call.
    assert.match(
      String(toolCall.tool_call_id),
      /^terminal-term-[0-9a-f-]{36}$/,
    );
    assert.equal(toolCall.kind, "execute");
    assert.deepEqual(toolCall.locations, []);
    assert.deepEqual(requested.data.options, [
      { option_id: "run", name: "Run", kind: "allow_once" },
      { option_id: "dont-run", name: "Don't run", kind: "reject_once" },
    ]);
    assert.equal(
      toolCall.title,
      `PASSED=[REDACTED] ${shown} -c echo [REDACTED]`,
    );
    assert.deepEqual(JSON.parse(String(toolCall.raw_input_summary)), {
      command: shown,
      program: shown,
      args: ["-c", "echo [REDACTED]"],
      env: { PASSED: "[REDACTED]" },
      cwd: "dir-[REDACTED]",
    });
    assert.ok(!JSON.stringify(events).includes(SECRET));
    const cancelled = await postJson(
      `${serve.url}/v1/runs/${requested.run_id}/cancel`,
      {},
    );
    await cancelled.body?.cancel();
  });
});

const API_TOKEN = "permission-policy-api-token-Rk5Wm2Zq8";

Deno.test("runner daemon: an approval request for a terminal command leaves the daemon with no secret in its title or input", async () => {
  const { serve, daemon } = await serveWithDaemon("approval-redaction", {
    serveArgs: [
      ...["--client-terminals", "true", "--api-token", API_TOKEN],
      ...["--allow-env-names", "SERVICE_API_KEY"],
    ],
    daemonArgs: ["--client-terminals", "true"],
  });
  try {
    await daemon.connected;
    const workspace = tempDir("approval-ws-");
    const cwd = join(workspace, `dir-${SECRET}`);
    Deno.mkdirSync(cwd);
    const tool = join(cwd, "tool");
    Deno.writeTextFileSync(tool, '#!/bin/sh\necho "$@"\n');
    Deno.chmodSync(tool, 0o755);
    const response = await postDaemonRun(serve.url, {
      daemonId: "approval-redaction",
      config: {
        workspace,
        "client-terminals": true,
        "permission-decision": "ask",
        "permission-timeout": 30,
        "env-json": { SERVICE_API_KEY: SECRET },
        "acp-command": agentCommand([
          "--terminal",
          JSON.stringify({
            command: tool,
            args: ["-c", `echo ${SECRET}`],
            env: { PASSED: SECRET },
            cwd,
          }),
        ]),
      },
    }, { authorization: `Bearer ${API_TOKEN}` });
    assert.equal(response.status, 200);
    const { events, messages } = await streamUntil(
      response,
      "permission.requested",
    );
    const requested = events.at(-1)!;
    await messages.return(undefined);
    const title = String(
      (requested.data.tool_call as Record<string, unknown>).title,
    );
    assert.match(
      title,
      /^PASSED=\[REDACTED\] .*dir-\[REDACTED\]\/tool -c echo \[REDACTED\]$/,
    );
    const sent = daemon.tap.fromDaemon.filter((frame) =>
      frame.includes("permission")
    );
    assert.ok(sent.length > 0, "the request crossed the wire");
    for (const frame of daemon.tap.fromDaemon) {
      assert.ok(!frame.includes(SECRET), frame);
    }
    const cancelled = await postJson(
      `${serve.url}/v1/runs/${requested.run_id}/cancel`,
      {},
      { authorization: `Bearer ${API_TOKEN}` },
    );
    await cancelled.body?.cancel();
  } finally {
    await daemon.stop();
    await serve.stop();
  }
});

Deno.test("runner run: each fs/write_text_file is decided by the rules on its title and path, ask takes permission-fallback, and the event says so", async () => {
  const workspace = join(tempDir(), "ws");
  for (const folder of ["notes", "secrets", "drafts"]) {
    Deno.mkdirSync(join(workspace, folder), { recursive: true });
  }
  const writes = ["notes/a.md", "secrets/k.pem", "drafts/d.txt", "other.txt"];
  const events = await runJsonEvents([
    ...["run", "custom", "--workspace", workspace, "--data-dir", tempDir()],
    "--acp-command",
    fixtureCommand(...writes.flatMap((path) => ["--fs-write", path])),
    ...["--fs-write", "true", "--langbot-assets-enabled", "false"],
    ...["--permission-decision", "reject_once"],
    ...["--permission-fallback", "allow_always"],
    "--permission-rules-json",
    JSON.stringify([
      {
        kind: "edit",
        title: "fs/write_text_file notes/*.md",
        decision: "allow",
      },
      { path: "secrets/**", decision: "reject_always" },
      { kind: "edit", path: "drafts/**", decision: "ask" },
    ]),
    ...["--json", "go"],
  ]);
  const decided = events.filter((e) => e.type === "permission.decided")
    .map((e) => e.data as Record<string, unknown>);
  for (const data of decided) {
    assert.match(String(data.request_id), /^[0-9a-f-]{36}$/);
  }
  const shown = (
    path: string,
    rule: number | "default",
    decision: string,
  ) => ({
    tool_call_id: null,
    title: `fs/write_text_file ${path}`,
    outcome: decision.startsWith("allow") ? "allowed" : "rejected",
    decision,
    by: "policy",
    rule,
    path,
  });
  assert.deepEqual(
    decided.map(({ request_id: _, ...data }) => data),
    [
      shown("notes/a.md", 0, "allow_once"),
      shown("secrets/k.pem", 1, "reject_always"),
      shown("drafts/d.txt", 2, "allow_always"),
      shown("other.txt", "default", "reject_once"),
    ],
  );
  assert.deepEqual(
    writes.map((path) => existsSync(join(workspace, path))),
    [true, false, true, false],
  );
});

/** `runner run --json` in a fresh workspace with the fixture running `flags`. */
async function runPolicy(
  flags: string[],
  options: string[],
  workspace = join(tempDir(), "ws"),
): Promise<Record<string, unknown>[]> {
  Deno.mkdirSync(workspace, { recursive: true });
  const run = await runCli([
    ...["run", "custom", "--workspace", workspace, "--data-dir", tempDir()],
    ...["--acp-command", agentCommand(flags)],
    ...["--langbot-assets-enabled", "false", ...options, "--json", "go"],
  ]);
  return parseJsonLines(run.stdout);
}

function decidedOf(events: Record<string, unknown>[]) {
  return events.filter((e) => e.type === "permission.decided").map((e) => {
    const { request_id: _, ...data } = e.data as Record<string, unknown>;
    return data;
  });
}

Deno.test("runner run: without rules permission-decision answers and no rule is named; a path rule never matches a request without locations", async () => {
  const calls = JSON.stringify([
    { kind: "execute", title: "Run make" },
    { kind: "edit", title: "Edit b", path: "b.txt" },
    { kind: "execute", title: "Run lint", noLocations: true },
  ]);
  const plain = await runPolicy(["--permission-calls", calls], [
    ...["--permission-decision", "reject_always"],
  ]);
  assert.deepEqual(
    decidedOf(plain).map(({ title, decision, rule }) => ({
      title,
      decision,
      rule,
    })),
    [
      { title: "Run make", decision: "reject_always", rule: undefined },
      { title: "Edit b", decision: "reject_always", rule: undefined },
      { title: "Run lint", decision: "reject_always", rule: undefined },
    ],
  );
  for (const data of decidedOf(plain)) assert.ok(!("rule" in data));

  const ruled = await runPolicy(["--permission-calls", calls], [
    ...["--permission-decision", "reject_once"],
    "--permission-rules-json",
    JSON.stringify([
      { kind: "edit", decision: "reject_always" },
      { path: "**", decision: "allow" },
    ]),
  ]);
  assert.deepEqual(
    decidedOf(ruled).map(({ title, decision, rule }) => [
      title,
      decision,
      rule,
    ]),
    [
      ["Run make", "reject_once", "default"],
      ["Edit b", "reject_always", 0],
      ["Run lint", "reject_once", "default"],
    ],
  );
});

Deno.test("runner run: a refused request, then a turn without text, fails run.permission_rejected naming the tool", async () => {
  const events = await runPolicy(["--permission", "--silent-on-reject"], [
    ...["--permission-decision", "reject_once"],
  ]);
  const end = events.find((e) => e.type === "run.failed")?.data as
    | Record<string, unknown>
    | undefined;
  assert.equal(end?.code, "run.permission_rejected");
  assert.match(String(end?.error), /"Write file" was refused \(reject_once\)/);
});

Deno.test("runner run: a terminal command is decided as a request of kind execute whose path is its cwd; a rule on both refuses it there only", async () => {
  const workspace = join(tempDir(), "ws");
  for (const folder of ["locked", "open"]) {
    Deno.mkdirSync(join(workspace, folder), { recursive: true });
  }
  const touch = (folder: string) => [
    "--terminal",
    JSON.stringify({
      command: "touch",
      args: ["ran"],
      cwd: join(workspace, folder),
    }),
  ];
  const events = await runPolicy([...touch("locked"), ...touch("open")], [
    ...["--client-terminals", "true", "--permission-decision", "allow_once"],
    "--permission-rules-json",
    JSON.stringify([
      { kind: "execute", path: "locked", decision: "reject" },
    ]),
  ], workspace);
  assert.deepEqual(
    decidedOf(events).map(({ title, decision, rule }) => [
      title,
      decision,
      rule,
    ]),
    [["touch ran", "reject_once", 0], ["touch ran", "allow_once", "default"]],
  );
  assert.ok(!existsSync(join(workspace, "locked", "ran")));
  assert.ok(existsSync(join(workspace, "open", "ran")));
});

Deno.test("runner serve: only the request a rule says to ask about goes to a person; the others are decided by their rule at once", async () => {
  await withServe({ args: ["--allow-custom-commands"] }, async (serve, dir) => {
    const calls = JSON.stringify([
      { kind: "read", title: "Read a", path: "a.txt" },
      { kind: "edit", title: "Edit b", path: "b.txt" },
    ]);
    const response = await postJson(`${serve.url}/v1/runs`, {
      input: { text: "go" },
      config: {
        ...fixtureConfig(join(dir, "ws"), ["--permission-calls", calls]),
        "permission-decision": "allow_once",
        "permission-rules-json": [
          { kind: "read", decision: "reject" },
          { kind: "edit", decision: "ask" },
        ],
        "langbot-assets-enabled": false,
      },
    });
    assert.equal(response.status, 200);
    const { events, messages } = await streamUntil(
      response,
      "permission.requested",
    );
    await messages.return(undefined);
    const asked = events.filter((e) => e.type.startsWith("permission."));
    assert.deepEqual(
      asked.map((e) => [e.type, e.data.title ?? e.data.tool_call, e.data.rule]),
      [
        ["permission.decided", "Read a", 0],
        ["permission.requested", asked[1].data.tool_call, 1],
      ],
    );
    assert.equal(
      (asked[1].data.tool_call as Record<string, unknown>).title,
      "Edit b",
    );
    assert.equal(asked[0].data.by, "policy");
    assert.equal(asked[0].data.decision, "reject_once");
    const cancelled = await postJson(
      `${serve.url}/v1/runs/${asked[1].run_id}/cancel`,
      {},
    );
    await cancelled.body?.cancel();
  });
});

Deno.test("runner serve, n8n webhook: ask where nobody can answer takes permission-fallback, and a rejecting fallback never becomes an approval", async () => {
  await withServe({ args: ["--allow-custom-commands"] }, async (serve, dir) => {
    const config = fixtureConfig(join(dir, "ws"), [
      ...["--permission", "--permission-options", "allow_once,allow_always"],
    ]);
    const query = new URLSearchParams({
      "acp-command": config["acp-command"] as string,
      provider: "custom",
      workspace: config.workspace as string,
      "permission-decision": "ask",
      "permission-fallback": "reject_once",
    });
    const response = await postJson(
      `${serve.url}/v1/webhooks/n8n?stream=false&${query}`,
      { chatInput: "write the file", session_id: "n8n-policy" },
    );
    assert.equal(response.status, 200);
    const body = await response.json();
    assert.equal(
      body.response,
      "permission: cancelled\necho: write the file (turn 1)",
    );
  });
});
