/**
 * `runner acp --url … --token …` as an editor spawns it: a stdio ACP agent
 * bridging to a real `runner serve`'s `/acp` with the fixture agent behind
 * it, over both transports, driven by the ACP SDK's client on its stdio.
 *
 * @module
 */

import assert from "node:assert/strict";
import * as acp from "@agentclientprotocol/sdk";
import { DENO_RUN_FLAGS } from "../../lib/runtime_permissions.ts";
import { ROOT } from "../helpers.ts";
import { agentCommand, startServe, tempDir } from "../serve_test_helpers.ts";

for (const transport of ["http", "websocket"]) {
  Deno.test(`runner acp --transport ${transport}: prompts and a permission reach the runner's agent and come back`, async () => {
    const dir = await tempDir();
    const serve = await startServe({
      dataDir: dir,
      args: [
        "--provider",
        "custom",
        "--acp-command",
        agentCommand([
          "--permission",
          "--permission-options",
          "allow_once,reject_once",
        ]),
        "--workspace",
        dir,
        "--permission-decision",
        "ask",
      ],
    });
    const bridge = new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        ...DENO_RUN_FLAGS,
        `${ROOT}main.ts`,
        "acp",
        "--url",
        `${serve.url}/acp`,
        "--transport",
        transport,
      ],
      env: { NO_COLOR: "1", RUNNER_API_TOKEN: serve.token ?? "" },
      stdin: "piped",
      stdout: "piped",
      stderr: "null",
    }).spawn();
    const texts: string[] = [];
    const connection = acp.client({ name: "editor" })
      .onNotification("session/update", ({ params }) => {
        if (
          params.update.sessionUpdate === "agent_message_chunk" &&
          params.update.content.type === "text"
        ) texts.push(params.update.content.text);
      })
      .onRequest("session/request_permission", () =>
        Promise.resolve({
          outcome: { outcome: "selected" as const, optionId: "allow_once" },
        }))
      .connect(acp.ndJsonStream(bridge.stdin, bridge.stdout));
    try {
      const init = await connection.agent.request("initialize", {
        protocolVersion: acp.PROTOCOL_VERSION,
        clientCapabilities: {},
      });
      assert.equal(init.agentInfo?.name, "runner");
      const { sessionId } = await connection.agent.request("session/new", {
        cwd: dir,
        mcpServers: [],
      });
      const first = await connection.agent.request("session/prompt", {
        sessionId,
        prompt: [{ type: "text", text: "one" }],
      });
      assert.equal(first.stopReason, "end_turn");
      assert.equal(
        texts.join(""),
        "permission: allow_once\necho: one (turn 1)",
      );
      texts.length = 0;
      await connection.agent.request("session/prompt", {
        sessionId,
        prompt: [{ type: "text", text: "two" }],
      });
      assert.equal(
        texts.join(""),
        "permission: allow_once\necho: two (turn 2)",
      );
    } finally {
      connection.close();
      await bridge.stdin.close().catch(() => {});
      try {
        bridge.kill();
      } catch { /* gone */ }
      await bridge.status;
      await serve.stop();
    }
  });
}
