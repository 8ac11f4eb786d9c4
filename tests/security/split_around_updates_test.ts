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
import type { RunEvent } from "../../lib/events.ts";
import {
  agentText,
  initialize,
  newSession,
  openAcpClient,
  promptText,
} from "../acp_client_helpers.ts";
import { agentCommand, parseJsonLines, runCli } from "../helpers.ts";
import {
  deltaText,
  postJson,
  sseEvents,
  tempDir,
  withServe,
} from "../serve_test_helpers.ts";

const SECRET = "sk-split-SECRET-0123456789";
const ENV_JSON = JSON.stringify({ API_TOKEN: SECRET });
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
    const args = [
      "run",
      "custom",
      ...["--acp-command", agentCommand(["--script", script(between)])],
      ...["--workspace", join(await tempDir(), "ws")],
      ...["--env-json", ENV_JSON],
    ];
    const human = await runCli([...args, "hi"]);
    assert.equal(human.code, 0, human.stderr);
    assertNoPiece(human.stdout, "stdout");
    assert.equal(human.stdout, SHOWN + "\n");
    const json = await runCli([...args, "--json", "hi"]);
    assert.equal(json.code, 0, json.stderr);
    const events = parseJsonLines(json.stdout) as unknown as RunEvent[];
    assert.equal(deltaText(events), SHOWN);
    assertNoPiece(deltaText(events), "the joined deltas");
  });
}

Deno.test("runner serve: a secret cut around other updates is redacted in the SSE deltas and on /acp", async () => {
  await withServe({
    args: [
      ...["--allow-custom-commands", "--provider", "custom"],
      ...["--workspace", await tempDir()],
      ...["--env-json", ENV_JSON],
    ],
  }, async (serve) => {
    for (const [name, between] of Object.entries(BETWEEN)) {
      const command = agentCommand(["--script", script(between)]);
      const sse = await sseEvents(
        await postJson(`${serve.url}/v1/runs`, {
          input: { text: "hi" },
          config: { "acp-command": command },
        }),
      );
      assert.equal(deltaText(sse), SHOWN, `SSE (${name})`);

      const editor = openAcpClient({
        url: serve.url,
        token: serve.token,
        profile: "http",
        query: { "acp-command": command },
      });
      try {
        await initialize(editor);
        const sessionId = await newSession(editor);
        await promptText(editor, sessionId, "hi");
        assert.equal(agentText(editor.updates, sessionId), SHOWN, name);
        assertNoPiece(JSON.stringify(editor.updates), `/acp (${name})`);
      } finally {
        editor.close();
      }
    }
  });
});
