/**
 * `/acp` on a remote-ssh location: the SDK's client against a real
 * `runner serve` whose target is the fixture agent on a real sshd. The
 * `initialize` answer carries what a handshake with the agent on the SSH
 * target learned (and says so in `_meta`), and a prompt streams the agent's
 * updates and is a run of `/v1/runs`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import {
  agentText,
  assertOnlyRun,
  initialize,
  newSession,
  openAcpClient,
  promptText,
} from "../acp_client_helpers.ts";
import { agentCommand, startServe, tempDir } from "../serve_test_helpers.ts";
import { SSHD_PATH, sshTargetConfig, startSshd } from "../ssh_helpers.ts";

const API_TOKEN = "acp-ssh-api-Lk8Jh5Gf2Ds9Aq4Wz7Xc1Vb6";

Deno.test({
  name:
    "acp http: on a remote-ssh location, initialize tells what a probe over ssh learned and a prompt runs on the SSH target",
  ignore: !SSHD_PATH,
  async fn() {
    const dir = await tempDir();
    const workspace = await Deno.makeTempDir({ dir, prefix: "remote-ws-" });
    const sshd = await startSshd();
    const configFile = join(dir, "serve.json");
    await Deno.writeTextFile(
      configFile,
      JSON.stringify({
        provider: "custom",
        // `--image`: a prompt capability only the agent itself can report.
        "acp-command": agentCommand(["--chunks", "2", "--image"]),
        workspace,
        ...sshTargetConfig(sshd),
      }),
    );
    const serve = await startServe({
      dataDir: dir,
      args: ["--api-token", API_TOKEN, "--config", configFile],
    });
    const editor = openAcpClient({
      url: serve.url,
      token: API_TOKEN,
      profile: "http",
    });
    try {
      const init = await initialize(editor);
      const runner = init._meta?.runner as Record<string, unknown>;
      assert.equal(runner.location, "remote-ssh");
      assert.equal(
        runner.capabilities_from,
        "probe",
        String(runner.probe_error),
      );
      assert.equal(runner.probed_on, "ssh-target");
      assert.equal(
        init.agentCapabilities?.promptCapabilities?.image,
        true,
        "the agent's own prompt capabilities, learned over ssh",
      );
      const sessionId = await newSession(editor);
      const answer = await promptText(editor, sessionId, "over ssh");
      assert.equal(answer.stopReason, "end_turn");
      assert.equal(
        agentText(editor.updates, sessionId),
        "echo: over ssh (turn 1)",
      );
      const run = await assertOnlyRun(serve.url, sessionId, answer);
      assert.equal(run.config.location, "remote-ssh");
    } finally {
      editor.close();
      await serve.stop();
      await sshd.close();
    }
  },
});
