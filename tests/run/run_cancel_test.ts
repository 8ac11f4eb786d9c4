/**
 * Cancel at the edges of a turn, with the real fixture agent: a cancel that
 * lands after the agent answered (in the quiet window) still wins, and a
 * permission request the agent sends while the run is being cancelled is
 * answered `cancelled` whatever `permission-decision` says.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import type { ManagedRun } from "../../lib/run/manager.ts";
import {
  cancelAfterFirstDelta,
  EventLog,
  fixtureConfig,
  harness,
  withHarness,
} from "../engine_helpers.ts";
import { assertAgentGone, readRecord, tempDir } from "../helpers.ts";

Deno.test("a cancel that lands after the agent answered, in the quiet window, still wins", async () => {
  let run: ManagedRun | undefined;
  let answered = 0;
  // The engine logs "turn answered" right before it starts the quiet window.
  const h = harness({
    log(entry) {
      if (entry.msg !== "turn answered") return;
      answered++;
      run?.handle.cancel();
    },
  });
  try {
    const pidFile = join(tempDir(), "pids.json");
    const config = fixtureConfig(
      ["--text", "answered", "--grandchild", "--pid-file", pidFile],
      { "late-update-ms": "5000" },
    );
    const started = await h.manager.start({ input: { text: "hi" }, config });
    run = started.run;
    const log = new EventLog(run);
    const result = await run.done;
    assert.equal(answered, 1, "the agent answered the prompt");
    assert.equal(result.status, "cancelled");
    const terminal = log.events.filter((e) =>
      e.type === "run.failed" || e.type === "run.completed"
    );
    assert.deepEqual(
      terminal.map((e) => [e.type, e.data.code]),
      [["run.failed", "run.cancelled"]],
    );
    assert.equal((await h.store.getRun(run.runId))?.status, "cancelled");
    assertAgentGone(pidFile);
  } finally {
    await h.close();
  }
});

Deno.test("a permission request sent while the run is being cancelled is answered cancelled", async () => {
  await withHarness(async (h) => {
    const record = join(tempDir(), "record.jsonl");
    const config = fixtureConfig(
      ["--stall-prompt", "--permission-on-cancel", "--record", record],
      { "permission-decision": "allow_once" },
    );
    const { log, result } = await cancelAfterFirstDelta(h.manager, {
      input: { text: "hi" },
      config,
    });
    assert.equal(result.status, "cancelled");
    const decided = log.ofType("permission.decided").map((e) => e.data);
    assert.match(String(decided[0]?.request_id), /^[0-9a-f-]{36}$/);
    assert.deepEqual(decided, [{
      request_id: decided[0].request_id,
      tool_call_id: "perm-1",
      title: "Write file",
      outcome: "cancelled",
      decision: "cancelled",
      by: "cancel",
    }]);
    const asked = readRecord(record).filter((line) =>
      line.event === "permission"
    );
    assert.deepEqual(asked.map((line) => line.outcome), [{
      outcome: "cancelled",
    }]);
    assert.equal(log.events.at(-1)?.data.code, "run.cancelled");
  });
});
