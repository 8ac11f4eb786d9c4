/**
 * A secret the agent prints split across chunks stays out of what an `/acp`
 * client sees, as it does on `/v1`'s streams (`redaction_split_test.ts`): the
 * attacker is a prompt-injected agent that cuts an operator's secret into
 * pieces so that no single `session/update` holds it whole.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  agentText,
  initialize,
  newSession,
  openAcpClient,
  PROFILES,
  promptText,
} from "../acp_client_helpers.ts";
import { serveWithDaemon } from "../daemon_test_helpers.ts";
import { agentCommand } from "../helpers.ts";
import { fixtureTargetArgs, tempDir } from "../serve_test_helpers.ts";
import { acpPrompt, withSecretServe } from "./secret_runs.ts";

const SECRET = "sk-split-SECRET-0123456789";
const SPLITS: Record<string, string[]> = {
  "two chunks": ["say sk-split-SE", "CRET-0123456789 now"],
  "three chunks": ["say sk-spl", "it-SECRET-01", "23456789 now"],
  "a chunk a character": [..."say ", ...SECRET, " now"],
};

for (const profile of PROFILES) {
  Deno.test(`acp ${profile}: a secret split over chunks reaches the client redacted`, async () => {
    await withSecretServe({ API_TOKEN: SECRET }, async (serve) => {
      for (const [name, parts] of Object.entries(SPLITS)) {
        const { updates, sessionId } = await acpPrompt(serve, {
          acpCommand: agentCommand(["--text-parts", JSON.stringify(parts)]),
          profile,
        });
        const seen = JSON.stringify(updates);
        assert.ok(!seen.includes(SECRET), `the secret (${name})`);
        for (const piece of parts.slice(0, -1)) {
          const tail = piece.replace(/^say /, "");
          if (tail.length > 3) {
            assert.ok(!seen.includes(tail), `"${tail}" (${name})`);
          }
        }
        assert.equal(agentText(updates, sessionId), "say [REDACTED] now", name);
      }
    });
  });
}

Deno.test("acp on a daemon location: the hub's own secret split over chunks reaches the client redacted", async () => {
  // Only the hub knows its API token, so only the hub's redaction stands
  // between the daemon's agent and the editor here.
  const apiToken = "acp-split-hub-Vb7Qm2Xk9Lr4Tz6Wn1Hc8Jd3";
  const parts = ["token acp-split-hub-Vb7", "Qm2Xk9Lr4Tz6", "Wn1Hc8Jd3 end"];
  const workspace = await Deno.makeTempDir({ dir: await tempDir() });
  const { serve, daemon } = await serveWithDaemon("split-laptop", {
    serveArgs: [
      ...["--api-token", apiToken],
      ...fixtureTargetArgs(workspace, ["--text-parts", JSON.stringify(parts)]),
      ...["--location", "daemon", "--daemon-id", "split-laptop"],
    ],
  });
  const editor = openAcpClient({
    url: serve.url,
    token: apiToken,
    profile: "http",
  });
  try {
    await daemon.connected;
    await initialize(editor);
    const sessionId = await newSession(editor);
    const answer = await promptText(editor, sessionId, "hi");
    assert.equal(answer.stopReason, "end_turn");
    const seen = JSON.stringify(editor.updates);
    for (const piece of ["acp-split-hub-Vb7", "Qm2Xk9Lr4Tz6", "Wn1Hc8Jd3"]) {
      assert.ok(!seen.includes(piece), `"${piece}" reached the editor`);
    }
    assert.equal(agentText(editor.updates, sessionId), "token [REDACTED] end");
  } finally {
    editor.close();
    await serve.stop();
    await daemon.stop();
  }
});
