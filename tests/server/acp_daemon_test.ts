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
import { agentText, initialize, openAcpClient } from "../acp_client_helpers.ts";
import { serveWithDaemon } from "../daemon_test_helpers.ts";
import { agentCommand, apiFetch, tempDir } from "../serve_test_helpers.ts";

const API_TOKEN = "acp-daemon-api-Vb7Qm2Xk9Lr4Tz6Wn1Hc8Jd3";

Deno.test("acp http: a prompt on a daemon location streams the agent's own updates through the hub", async () => {
  const workspace = await Deno.makeTempDir({
    dir: await tempDir(),
    prefix: "ws-",
  });
  const { serve, daemon } = await serveWithDaemon("acp-laptop", {
    serveArgs: [
      "--api-token",
      API_TOKEN,
      "--provider",
      "custom",
      "--location",
      "daemon",
      "--daemon-id",
      "acp-laptop",
      "--workspace",
      workspace,
      "--acp-command",
      agentCommand(["--chunks", "3", "--rich-updates"]),
    ],
  });
  const editor = openAcpClient({
    url: serve.url,
    token: API_TOKEN,
    profile: "http",
  });
  try {
    await daemon.connected;
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
    const { sessionId } = await editor.agent.request("session/new", {
      cwd: "/on/the/editor",
      mcpServers: [],
    });
    const answer = await editor.agent.request("session/prompt", {
      sessionId,
      prompt: [{ type: "text", text: "over the hub" }],
    });
    assert.equal(answer.stopReason, "end_turn");
    const kinds = editor.updates
      .filter((n) => n.sessionId === sessionId)
      .map((n) => n.update.sessionUpdate as string);
    assert.equal(
      kinds.filter((kind) => kind === "agent_message_chunk").length,
      3,
      "each chunk as the agent sent it",
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

    const runId = (answer._meta?.runner as { run_id: string }).run_id;
    const listed = await (await apiFetch(
      `${serve.url}/v1/runs?conversation_id=${sessionId}`,
    )).json();
    assert.deepEqual(
      listed.runs.map((run: { run_id: string }) => run.run_id),
      [runId],
    );
    assert.equal(listed.runs[0].status, "completed");
    assert.equal(listed.runs[0].config.location, "daemon");
  } finally {
    editor.close();
    await serve.stop();
    await daemon.stop();
  }
});

Deno.test("acp http: on a daemon location, the hub's own secrets are redacted from the passed-on updates", async () => {
  const workspace = await Deno.makeTempDir({
    dir: await tempDir(),
    prefix: "ws-",
  });
  // The daemon does not know the hub's API token: only the hub can take it out.
  const { serve, daemon } = await serveWithDaemon("acp-secret", {
    serveArgs: [
      "--api-token",
      API_TOKEN,
      "--provider",
      "custom",
      "--location",
      "daemon",
      "--daemon-id",
      "acp-secret",
      "--workspace",
      workspace,
      "--acp-command",
      agentCommand(["--text", `the token is ${API_TOKEN}`]),
    ],
  });
  const editor = openAcpClient({
    url: serve.url,
    token: API_TOKEN,
    profile: "http",
  });
  try {
    await daemon.connected;
    await initialize(editor);
    const { sessionId } = await editor.agent.request("session/new", {
      cwd: "/on/the/editor",
      mcpServers: [],
    });
    await editor.agent.request("session/prompt", {
      sessionId,
      prompt: [{ type: "text", text: "tell me" }],
    });
    assert.match(agentText(editor.updates, sessionId), /^the token is /);
    assert.ok(!JSON.stringify(editor.updates).includes(API_TOKEN));
  } finally {
    editor.close();
    await serve.stop();
    await daemon.stop();
  }
});
