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
import { agentCommand, tempDir } from "../helpers.ts";
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
