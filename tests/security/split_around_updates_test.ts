/**
 * An agent cuts a secret in two and puts another update between the halves
 * (a tool call, a thought, a plan), so that no redactor that stops at the
 * next update sees it whole. A reader joins a message's deltas (`runner
 * run` prints them, LangBot appends them, an editor appends `/acp` chunks):
 * the secret must not show there, nor in anything else the user sees.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { agentText } from "../acp_client_helpers.ts";
import { agentCommand, runCli } from "../helpers.ts";
import {
  deltaText,
  postJson,
  sseEvents,
  tempDir,
} from "../serve_test_helpers.ts";
import { acpPrompt, runWithSecrets, withSecretServe } from "./secret_runs.ts";

const SECRET = "sk-split-SECRET-0123456789";
const ENV = { API_TOKEN: SECRET };
const BETWEEN: Record<string, string[]> = {
  "a tool call": ["tool", "t1"],
  "a thought": ["thought", "hm"],
  "a plan": ["plan", "p"],
};
const SHOWN = "say [REDACTED] now";

function script(between: string[]): string {
  return JSON.stringify([
    ["text", "say sk-split-SE"],
    between,
    ["text", "CRET-0123456789 now"],
  ]);
}

function assertNoPiece(text: string, where: string) {
  for (const piece of [SECRET, "sk-split-SE", "CRET-0123456789"]) {
    assert.ok(!text.includes(piece), `"${piece}" in ${where}`);
  }
}

for (const [name, between] of Object.entries(BETWEEN)) {
  Deno.test(`runner run: a secret cut around ${name} is redacted on stdout and in --json`, async () => {
    const command = agentCommand(["--script", script(between)]);
    const human = await runCli([
      ...["run", "custom", "--acp-command", command],
      ...["--workspace", join(await tempDir(), "ws")],
      ...["--env-json", JSON.stringify(ENV), "hi"],
    ]);
    assert.equal(human.code, 0, human.stderr);
    assertNoPiece(human.stdout, "stdout");
    assert.equal(human.stdout, SHOWN + "\n");
    const { result, events } = await runWithSecrets(ENV, command);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(deltaText(events), SHOWN);
    assertNoPiece(deltaText(events), "the joined deltas");
  });
}

Deno.test("runner serve: a secret cut around other updates is redacted in the SSE deltas and on /acp", async () => {
  await withSecretServe(ENV, async (serve) => {
    for (const [name, between] of Object.entries(BETWEEN)) {
      const command = agentCommand(["--script", script(between)]);
      const sse = await sseEvents(
        await postJson(`${serve.url}/v1/runs`, {
          input: { text: "hi" },
          config: { "acp-command": command },
        }),
      );
      assert.equal(deltaText(sse), SHOWN, `SSE (${name})`);

      const { updates, sessionId } = await acpPrompt(serve, {
        acpCommand: command,
      });
      assert.equal(agentText(updates, sessionId), SHOWN, name);
      assertNoPiece(JSON.stringify(updates), `/acp (${name})`);
    }
  });
});
