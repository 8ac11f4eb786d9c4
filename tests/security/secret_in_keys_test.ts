/**
 * An agent that knows a secret can put it where redaction of strings does
 * not look: as the name of a field (a tool call's input or output, an update
 * of a kind the runner does not know). The secret must not show in the
 * run's events (`runner run --json`, SSE, stored) nor in `/acp`'s updates.
 *
 * @module
 */

import assert from "node:assert/strict";
import { agentText } from "../acp_client_helpers.ts";
import { agentCommand } from "../helpers.ts";
import { apiFetch, postJson, sseEvents } from "../serve_test_helpers.ts";
import { acpPrompt, runWithSecrets, withSecretServe } from "./secret_runs.ts";

const SECRET = "sk-keys-SECRET-0123456789abcdef";
const ENV = { API_TOKEN: SECRET };
const UPDATES = [
  {
    sessionUpdate: "tool_call",
    toolCallId: "t1",
    title: "Read",
    kind: "read",
    status: "pending",
    rawInput: { [SECRET]: "input" },
  },
  {
    sessionUpdate: "tool_call_update",
    toolCallId: "t1",
    status: "completed",
    rawOutput: { nested: [{ [SECRET]: "output" }] },
  },
  { sessionUpdate: "mystery_update", [SECRET]: { x: 1 } },
];
const COMMAND = agentCommand([
  "--script",
  JSON.stringify([
    ["text", "done"],
    ...UPDATES.map((update) => ["update", JSON.stringify(update)]),
  ]),
]);

function assertHidden(text: string, where: string) {
  assert.ok(text.includes("[REDACTED]"), `${where} shows the fields`);
  assert.ok(!text.includes(SECRET), `the secret as a field name in ${where}`);
}

Deno.test("runner run --json: a secret as a field name is redacted", async () => {
  const { result } = await runWithSecrets(ENV, COMMAND);
  assert.equal(result.code, 0, result.stderr);
  assertHidden(result.stdout, "runner run --json");
});

Deno.test("runner serve: a secret as a field name is redacted in SSE, stored events and /acp", async () => {
  await withSecretServe(ENV, async (serve) => {
    const sse = await sseEvents(
      await postJson(`${serve.url}/v1/runs`, {
        input: { text: "hi" },
        config: { "acp-command": COMMAND },
      }),
    );
    assertHidden(JSON.stringify(sse), "SSE");
    const stored = await apiFetch(
      `${serve.url}/v1/runs/${sse[0].run_id}/events`,
    );
    assertHidden(await stored.text(), "the stored events");

    const { updates, sessionId } = await acpPrompt(serve, {
      acpCommand: COMMAND,
    });
    assert.equal(agentText(updates, sessionId), "done");
    assertHidden(JSON.stringify(updates), "/acp");
  });
});
