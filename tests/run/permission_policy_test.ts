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
    assert.match(String(toolCall.tool_call_id), /^terminal-term-[0-9a-f-]{36}$/);
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
