/**
 * `/acp` on a real `runner serve` with the fixture agent, driven by the ACP
 * SDK's own client over both profiles (Streamable HTTP and WebSocket): what
 * an editor sees of initialize, a streamed prompt, cancel, permissions asked
 * back, load after a reconnect and a restart, set_mode, and the floors and
 * the token holding.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  type AcpProfile,
  type AcpTestClient,
  agentText,
  initialize,
  openAcpClient,
  PROFILES,
} from "../acp_client_helpers.ts";
import {
  agentCommand,
  apiFetch,
  type ServeProcess,
  startServe,
  tempDir,
} from "../serve_test_helpers.ts";

/** `runner serve` whose operator target is the fixture agent with `flags`. */
async function serveFixture(
  flags: string[],
  extraArgs: string[] = [],
  dataDir?: string,
): Promise<{ serve: ServeProcess; dataDir: string; workspace: string }> {
  const dir = dataDir ?? await tempDir();
  const workspace = await Deno.makeTempDir({ dir, prefix: "ws-" });
  const serve = await startServe({
    dataDir: dir,
    args: [
      "--provider",
      "custom",
      "--acp-command",
      agentCommand(flags),
      "--workspace",
      workspace,
      ...extraArgs,
    ],
  });
  return { serve, dataDir: dir, workspace };
}

function client(
  serve: ServeProcess,
  profile: AcpProfile,
  extra: Partial<Parameters<typeof openAcpClient>[0]> = {},
): AcpTestClient {
  return openAcpClient({
    url: serve.url,
    token: serve.token,
    profile,
    ...extra,
  });
}

async function newSession(
  agent: AcpTestClient,
  meta?: Record<string, unknown>,
): Promise<string> {
  const answer = await agent.agent.request("session/new", {
    cwd: "/somewhere/on/the/editor",
    mcpServers: [],
    ...(meta ? { _meta: meta } : {}),
  });
  return answer.sessionId;
}

function prompt(agent: AcpTestClient, sessionId: string, text: string) {
  return agent.agent.request("session/prompt", {
    sessionId,
    prompt: [{ type: "text", text }],
  });
}

for (const profile of PROFILES) {
  Deno.test(`acp ${profile}: initialize tells the target's capabilities; a prompt streams and is a run`, async () => {
    const { serve } = await serveFixture([
      "--chunks",
      "3",
      "--image",
      "--load-session",
    ]);
    const editor = client(serve, profile);
    try {
      const init = await initialize(editor);
      assert.equal(init.protocolVersion, 1);
      assert.equal(init.agentCapabilities?.loadSession, true);
      assert.equal(init.agentCapabilities?.promptCapabilities?.image, true);
      assert.deepEqual(init.authMethods, []);
      const runnerMeta = init._meta?.runner as Record<string, unknown>;
      assert.equal(runnerMeta.capabilities_from, "probe");

      const sessionId = await newSession(editor);
      const answer = await prompt(editor, sessionId, "hello there");
      assert.equal(answer.stopReason, "end_turn");
      const chunks = editor.updates.filter((n) =>
        n.sessionId === sessionId &&
        n.update.sessionUpdate === "agent_message_chunk"
      );
      assert.equal(
        chunks.length,
        3,
        "each chunk passed on as the agent sent it",
      );
      assert.equal(
        agentText(editor.updates, sessionId),
        "echo: hello there (turn 1)",
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
    } finally {
      editor.close();
      await serve.stop();
    }
  });
}
