/**
 * Token usage on the terminal event, from the real fixture agent through the
 * run manager: LangBot's names, the turns of a steered run added up, what was
 * counted before a failure, and nothing (never zeros) when the agent reports
 * nothing.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  EventLog,
  fixtureConfig,
  type Harness,
  makeGate,
  withHarness,
} from "../engine_helpers.ts";
import { fixtureTurnTokens, fixtureTurnUsage } from "../usage_helpers.ts";

function runOnce(flags: string[]) {
  return withHarness(async (h) => {
    const started = await h.manager.start({
      input: { text: "hi" },
      config: fixtureConfig(flags),
    });
    assert.equal(started.kind, "started");
    const log = new EventLog(started.run);
    await started.run.done;
    const stored = await h.store.getEvents(started.run.runId);
    return { log, stored };
  });
}

/**
 * Starts a run of `conversationId` ("first") of the fixture agent with
 * `fixtureFlags`, waiting at a gate, and once its agent streams, steers
 * `follow` into it; the run, its events and the gate.
 */
async function startThenSteer(
  h: Harness,
  request: {
    conversationId: string;
    fixtureFlags: string[];
    follow: string;
  },
) {
  const { conversationId } = request;
  const gate = await makeGate();
  const config = fixtureConfig([
    ...request.fixtureFlags,
    ...["--gate-fifo", gate.path],
  ]);
  const started = await h.manager.start({
    conversationId,
    input: { text: "first" },
    config,
  });
  assert.equal(started.kind, "started");
  const log = new EventLog(started.run);
  await log.waitFor((e) => e.type === "message.delta");
  const steered = await h.manager.start({
    conversationId,
    input: { text: request.follow },
    config,
  });
  assert.equal(steered.kind, "steered");
  return { started, log, gate };
}

Deno.test("run.completed carries the turn's tokens in LangBot's names beside the context window and cost", async () => {
  const { log, stored } = await runOnce(["--usage", "turn"]);
  const completed = log.ofType("run.completed")[0];
  assert.deepEqual(completed.usage, fixtureTurnUsage(1));
  assert.deepEqual(stored.at(-1)?.usage, completed.usage, "stored as sent");
});

Deno.test("an agent that reports only usage_update gives the window and cost, no token counters", async () => {
  const { log } = await runOnce(["--usage", "update"]);
  assert.deepEqual(log.ofType("run.completed")[0].usage, {
    used: 1000,
    size: 200000,
    cost: { amount: 0.25, currency: "USD" },
  });
});

Deno.test("an agent that reports no usage gives run.completed no usage key, never zeros", async () => {
  const { log, stored } = await runOnce(["--usage", "none"]);
  const completed = log.ofType("run.completed")[0];
  assert.equal("usage" in completed, false, JSON.stringify(completed));
  assert.equal("usage" in stored.at(-1)!, false);
});

Deno.test("a steered run adds its turns' tokens; the window and cost are the last turn's", async () => {
  await withHarness(async (h) => {
    const { started, log, gate } = await startThenSteer(h, {
      conversationId: "steered",
      fixtureFlags: ["--usage", "currencies"],
      follow: "second",
    });
    await gate.release();
    await gate.release();
    assert.equal((await started.run.done).status, "completed");
    assert.deepEqual(log.ofType("run.completed")[0].usage, {
      ...fixtureTurnUsage(2, "EUR"),
      ...fixtureTurnTokens(2),
    });
  });
});

Deno.test("run.failed carries what was counted before the failure", async () => {
  await withHarness(async (h) => {
    const { started, log, gate } = await startThenSteer(h, {
      conversationId: "failing",
      fixtureFlags: ["--usage", "turn", "--exit-on-prompt", "crash"],
      follow: "crash now",
    });
    await gate.release();
    assert.equal((await started.run.done).status, "failed");
    const failed = log.ofType("run.failed")[0];
    assert.equal(failed.data.code, "acp.process_exited");
    assert.deepEqual(failed.usage, fixtureTurnUsage(1));
  });
});

Deno.test("a run that fails before any turn answered has no usage on run.failed", async () => {
  const { log } = await runOnce(["--usage", "turn", "--fail-prompt"]);
  const failed = log.ofType("run.failed")[0];
  assert.ok(failed, "the run failed");
  assert.equal("usage" in failed, false, JSON.stringify(failed));
});
