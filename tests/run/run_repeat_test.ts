/**
 * The run manager never takes a request that names an existing run for a
 * follow-up: a repeated start is refused before any steering.
 *
 * @module
 */

import assert from "node:assert/strict";
import { RunnerError } from "../../lib/errors.ts";
import {
  EventLog,
  fixtureConfig,
  makeGate,
  withHarness,
} from "../engine_helpers.ts";

Deno.test("a start naming the active run's own run_id is refused, not steered into it", async () => {
  await withHarness(async (h) => {
    const gate = await makeGate();
    const config = fixtureConfig(["--gate-fifo", gate.path]);
    const started = await h.manager.start({
      runId: "r-1",
      conversationId: "c",
      input: { text: "once" },
      config,
    });
    const log = new EventLog(started.run);
    await log.waitFor((e) => e.type === "message.delta");
    await assert.rejects(
      () =>
        h.manager.start({
          runId: "r-1",
          conversationId: "c",
          input: { text: "once" },
          config,
        }),
      (error) =>
        error instanceof RunnerError && error.code === "config.invalid" &&
        /run_id r-1 already exists/.test(error.message),
    );
    await gate.release();
    assert.equal((await started.run.done).status, "completed");
    assert.deepEqual(log.messages(), ["echo: once (turn 1)"]);
  });
});
