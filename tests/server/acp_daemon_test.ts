/**
 * `/acp` on a daemon location: the SDK's client against a real
 * `runner serve --daemon-enabled` whose target is a real `runner daemon`
 * running the fixture agent. The agent's live `session/update`s cross the
 * hub (`run.update`, the `session.update` capability) and reach the client
 * as the agent sent them; the prompt is a run of `/v1/runs`. `initialize`
 * says nothing was learned of the daemon's agent, and why.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  agentText,
  assertOnlyRun,
  initialize,
  newSession,
  openAcpClient,
  promptText,
} from "../acp_client_helpers.ts";
import { serveWithDaemon } from "../daemon_test_helpers.ts";
import { fixtureTargetArgs, tempDir } from "../serve_test_helpers.ts";

const API_TOKEN = "acp-daemon-api-Vb7Qm2Xk9Lr4Tz6Wn1Hc8Jd3";

/**
 * A hub whose operator target is the fixture agent with `flags` on daemon
 * `daemonId` (connected), and an editor on its `/acp` over HTTP.
 */
async function acpOnDaemon(daemonId: string, flags: string[]) {
  const workspace = await Deno.makeTempDir({
    dir: await tempDir(),
    prefix: "ws-",
  });
  const { serve, daemon } = await serveWithDaemon(daemonId, {
    serveArgs: [
      ...["--api-token", API_TOKEN],
      ...fixtureTargetArgs(workspace, flags),
      ...["--location", "daemon", "--daemon-id", daemonId],
    ],
  });
  const editor = openAcpClient({
    url: serve.url,
    token: API_TOKEN,
    profile: "http",
  });
  const close = async () => {
    editor.close();
    await serve.stop();
    await daemon.stop();
  };
  try {
    await daemon.connected;
  } catch (error) {
    await close();
    throw error;
  }
  return { serve, editor, close };
}

Deno.test("acp http: a prompt on a daemon location streams the agent's own updates through the hub", async () => {
  const { serve, editor, close } = await acpOnDaemon("acp-laptop", [
    "--chunks",
    "3",
    "--rich-updates",
  ]);
  try {
    const init = await initialize(editor);
    const runnerMeta = init._meta?.runner as Record<string, unknown>;
    assert.equal(runnerMeta.location, "daemon");
    assert.equal(runnerMeta.capabilities_from, "runner");
    assert.match(
      String(runnerMeta.capabilities_note),
      /daemon acp-laptop, which the hub does not ask/,
      "it says where the capabilities came from: nothing was learned of the daemon's agent",
    );
    assert.deepEqual(
      init.agentCapabilities?.promptCapabilities,
      {},
      "only what every agent takes (text and resource links)",
    );
    const sessionId = await newSession(editor);
    const answer = await promptText(editor, sessionId, "over the hub");
    assert.equal(answer.stopReason, "end_turn");
    const kinds = editor.updates
      .filter((n) => n.sessionId === sessionId)
      .map((n) => n.update.sessionUpdate as string);
    const chunks = kinds.filter((kind) => kind === "agent_message_chunk");
    assert.ok(
      chunks.length >= 1 && chunks.length <= 3,
      "the agent's chunks, joined where they waited together",
    );
    assert.equal(
      agentText(editor.updates, sessionId),
      "echo: over the hub (turn 1)",
    );
    const usage = editor.updates.find((n) =>
      n.update.sessionUpdate === "usage_update"
    );
    assert.deepEqual(
      (usage?.update as { cost?: unknown }).cost,
      { amount: 0.01, currency: "USD" },
      "a usage update the run's events do not retell reaches the client",
    );

    const run = await assertOnlyRun(serve.url, sessionId, answer);
    assert.equal(run.config.location, "daemon");
  } finally {
    await close();
  }
});

Deno.test("acp http: on a daemon location, the hub's own secrets are redacted from the passed-on updates", async () => {
  // The daemon does not know the hub's API token: only the hub can take it out.
  const { editor, close } = await acpOnDaemon("acp-secret", [
    "--text",
    `the token is ${API_TOKEN}`,
  ]);
  try {
    await initialize(editor);
    const sessionId = await newSession(editor);
    await promptText(editor, sessionId, "tell me");
    assert.match(agentText(editor.updates, sessionId), /^the token is /);
    assert.ok(!JSON.stringify(editor.updates).includes(API_TOKEN));
  } finally {
    await close();
  }
});
