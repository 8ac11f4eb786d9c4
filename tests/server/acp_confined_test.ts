/**
 * `/acp` on a confined local run: `runner serve --sandbox confined
 * --workspace-roots …` with the fixture agent in bubblewrap, driven by the
 * ACP SDK's client. A session's workspace may be chosen inside the roots
 * only, the sandbox cannot be turned off from `_meta`, and the agent inside
 * reaches its workspace but not the runner's home or anything outside.
 *
 * @module
 */

import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import * as acp from "@agentclientprotocol/sdk";
import { agentText, initialize, openAcpClient } from "../acp_client_helpers.ts";
import {
  confinedFixtureCommand,
  confinedFlags,
  reachLines,
  sandboxWorld,
} from "../sandbox_helpers.ts";
import { startServe, tempDir } from "../serve_test_helpers.ts";

Deno.test("acp websocket: a prompt on a confined run stays in its workspace under the roots", async () => {
  const world = sandboxWorld();
  const roots = await tempDir();
  const outside = await tempDir();
  const project = join(roots, "project");
  const stray = join(outside, "stray.txt");
  const inside = join(project, "inside.txt");
  const serve = await startServe({
    dataDir: await tempDir(),
    env: world.environment,
    args: [
      "--provider",
      "custom",
      "--acp-command",
      confinedFixtureCommand(
        "--try-read",
        world.homeSecret,
        "--try-write",
        stray,
        "--try-write",
        inside,
      ),
      ...confinedFlags(),
      "--workspace",
      join(roots, "default"),
      "--workspace-roots",
      roots,
    ],
  });
  const editor = openAcpClient({
    url: serve.url,
    token: serve.token,
    profile: "websocket",
  });
  const refusal = (config: Record<string, unknown>) =>
    editor.agent.request("session/new", {
      cwd: "/editor",
      mcpServers: [],
      _meta: { runner: { config } },
    }).then(
      () => assert.fail(`${JSON.stringify(config)} was accepted`),
      (error: acp.RequestError) => error,
    );
  try {
    const init = await initialize(editor);
    assert.equal(
      (init._meta?.runner as { sandbox: string }).sandbox,
      "confined",
    );

    const offRoots = await refusal({ workspace: world.home });
    assert.equal(offRoots.code, -32602, "a workspace outside the roots");
    const unconfined = await refusal({ workspace: project, sandbox: "off" });
    assert.equal(unconfined.code, -32602, "the sandbox turned off");

    const { sessionId } = await editor.agent.request("session/new", {
      cwd: "/editor",
      mcpServers: [],
      _meta: { runner: { config: { workspace: project } } },
    });
    const answer = await editor.agent.request("session/prompt", {
      sessionId,
      prompt: [{ type: "text", text: "reach" }],
    });
    assert.equal(answer.stopReason, "end_turn");
    const reach = reachLines(agentText(editor.updates, sessionId));
    assert.match(reach[`try-read ${world.homeSecret}`], /^error/);
    assert.match(reach[`try-write ${stray}`], /^error/);
    assert.equal(reach[`try-write ${inside}`], "ok");
    assert.equal(existsSync(stray), false, "nothing written outside");
    assert.equal(
      Deno.readTextFileSync(inside),
      "written by the fixture itself\n",
    );
  } finally {
    editor.close();
    await serve.stop();
  }
});
