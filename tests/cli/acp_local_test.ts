/**
 * `runner acp` without `--url`, as an editor spawns it: a stdio ACP agent
 * fronting the fixture agent itself, with no server, driven by the ACP
 * SDK's client on its stdio. The operator's policy holds (a permission left
 * to a person is asked back, a widening key is refused) and every prompt is
 * a run in the data directory's store.
 *
 * @module
 */

import assert from "node:assert/strict";
import * as acp from "@agentclientprotocol/sdk";
import {
  newSession,
  openStdioEditor,
  promptText,
} from "../acp_client_helpers.ts";
import { openStoreNow, tempDir } from "../helpers.ts";
import { askingTargetArgs } from "../serve_test_helpers.ts";

/** The fixture agent answers in two chunks, after a permission it asks. */
const AGENT_FLAGS = ["--chunks", "2"];

Deno.test("runner acp without --url: a local agent under the operator's policy, its prompts recorded as runs", async () => {
  const dataDir = tempDir();
  const workspace = tempDir();
  const editor = openStdioEditor([
    ...["--data-dir", dataDir],
    ...askingTargetArgs(workspace, AGENT_FLAGS),
  ]);
  const { agent: runnerAcp, updates, asked, child } = editor;
  let exited = false;
  try {
    const init = await runnerAcp.request("initialize", {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: {},
    });
    assert.equal(init.agentInfo?.name, "runner");
    assert.equal(
      (init._meta?.runner as Record<string, unknown>).capabilities_from,
      "probe",
    );

    const widening = await runnerAcp.request("session/new", {
      cwd: workspace,
      mcpServers: [],
      _meta: { runner: { config: { "acp-command": "sh -c id" } } },
    }).then(() => undefined, (error: acp.RequestError) => error);
    assert.ok(widening, "a key the operator keeps is refused");
    assert.equal(widening.code, -32602);
    assert.equal((widening.data as { code: string }).code, "http.forbidden");

    const sessionId = await newSession(editor, { cwd: workspace });
    const answer = await promptText(editor, sessionId, "local");
    assert.equal(answer.stopReason, "end_turn");
    assert.equal(asked.length, 1, "the policy's ask went to the client");
    const text = updates.filter((n) =>
      n.update.sessionUpdate === "agent_message_chunk"
    ).map((n) => (n.update as { content: { text: string } }).content.text).join(
      "",
    );
    assert.equal(text, "permission: allow_once\necho: local (turn 1)");
    const runId = (answer._meta?.runner as { run_id: string }).run_id;

    editor.disconnect();
    await child.stdin.close().catch(() => {});
    const status = await child.status;
    exited = true;
    assert.equal(status.code, 0, "the client closing ends runner acp");

    const store = openStoreNow(dataDir);
    try {
      const runs = await store.listRuns({
        conversationId: sessionId,
        limit: 10,
      });
      assert.deepEqual(runs.map((run) => run.runId), [runId]);
      assert.equal(runs[0].status, "completed");
      const events = await store.getEvents(runId);
      assert.ok(
        events.some((event) =>
          event.type === "permission.decided" &&
          event.data.option_id === "allow_once"
        ),
        "the client's answer is the run's permission decision",
      );
    } finally {
      await store.close();
    }
  } finally {
    if (!exited) await editor.close();
  }
});
