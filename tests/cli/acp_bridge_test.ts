/**
 * `runner acp --url … --token …` as an editor spawns it: a stdio ACP agent
 * bridging to a real `runner serve`'s `/acp` with the fixture agent behind
 * it, over both transports, driven by the ACP SDK's client on its stdio.
 *
 * @module
 */

import assert from "node:assert/strict";
import * as acp from "@agentclientprotocol/sdk";
import {
  agentText,
  newSession,
  openStdioEditor,
  promptText,
} from "../acp_client_helpers.ts";
import {
  askingTargetArgs,
  startServe,
  tempDir,
} from "../serve_test_helpers.ts";

for (const transport of ["http", "websocket"]) {
  Deno.test(`runner acp --transport ${transport}: prompts and a permission reach the runner's agent and come back`, async () => {
    const dir = await tempDir();
    const serve = await startServe({
      dataDir: dir,
      args: askingTargetArgs(dir),
    });
    const editor = openStdioEditor(
      ["--url", `${serve.url}/acp`, "--transport", transport],
      { RUNNER_API_TOKEN: serve.token ?? "" },
    );
    try {
      const init = await editor.agent.request("initialize", {
        protocolVersion: acp.PROTOCOL_VERSION,
        clientCapabilities: {},
      });
      assert.equal(init.agentInfo?.name, "runner");
      const sessionId = await newSession(editor, { cwd: dir });
      const first = await promptText(editor, sessionId, "one");
      assert.equal(first.stopReason, "end_turn");
      assert.equal(
        agentText(editor.updates, sessionId),
        "permission: allow_once\necho: one (turn 1)",
      );
      editor.updates.length = 0;
      await promptText(editor, sessionId, "two");
      assert.equal(
        agentText(editor.updates, sessionId),
        "permission: allow_once\necho: two (turn 2)",
      );
    } finally {
      await editor.close();
      await serve.stop();
    }
  });
}
