/**
 * The recorder's write order for a conversation's session: the remembered
 * session config values land on the session row its id made, also when the
 * two events come back to back (a daemon's events arrive from the wire in
 * one read), so the next run of the conversation gets them back.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createRunRecorder } from "../../lib/run/recording.ts";
import { SESSION_SETTINGS_KEY } from "../../lib/run/session_memory.ts";
import { openStore } from "../../lib/store/open.ts";
import type { SessionKey } from "../../lib/store/types.ts";
import { tempDir } from "../helpers.ts";

const KEY: SessionKey = {
  conversationId: "conv-order",
  provider: "custom",
  location: "local",
  target: "",
  workspace: "/srv/ws",
  agentCommand: "agent --acp",
};

Deno.test("a session id and its remembered values emitted back to back are both stored, the values on the id's row", async () => {
  const store = await openStore({ dataDir: tempDir() });
  try {
    const runId = "run-order-1";
    await store.createRun({
      runId,
      conversationId: KEY.conversationId,
      config: {},
      status: "active",
    });
    const recorder = createRunRecorder({
      store,
      runId,
      sessionKey: KEY,
      secrets: [],
      log: () => {},
    });
    const event = (sequence: number, key: string, value: unknown) => ({
      run_id: runId,
      type: "state.updated",
      sequence,
      timestamp: Date.now(),
      data: { key, value },
    });
    recorder.emit(event(1, "external.acp_session_id", "session-abc"));
    recorder.emit(
      event(2, SESSION_SETTINGS_KEY, { model: "fast", mode: "plan" }),
    );
    await recorder.settled();
    const sessions = await store.listSessions(KEY.conversationId);
    assert.equal(sessions.length, 1);
    assert.equal(sessions[0].sessionId, "session-abc");
    assert.deepEqual(sessions[0].settings, { model: "fast", mode: "plan" });
  } finally {
    await store.close();
  }
});
