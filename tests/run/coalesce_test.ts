/**
 * The coalescing stage, end to end through the real engine, store and
 * fixture agent: text chunks become fewer deltas with the agent's exact text
 * and order kept around every other event, and nothing is lost at the end of
 * a turn or on cancel.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  createEventRestorer,
  isTerminalEvent,
  type RunEvent,
} from "../../lib/events.ts";
import {
  EventLog,
  fixtureConfig,
  harness,
  makeGate,
  withHarness,
} from "../engine_helpers.ts";

/** Run config extras: no assets (their run token would be a secret). */
const NO_SECRETS = { "langbot-assets-enabled": false };

function deltaTexts(events: RunEvent[]): string[] {
  return events.filter((event) => event.type === "message.delta").map((
    event,
  ) => (event.data.chunk as { content: string }).content);
}

/** Event types with runs of consecutive deltas shown once. */
function collapsedTypes(events: RunEvent[]): string[] {
  return events.map((event) => event.type).filter((type, index, all) =>
    type !== "message.delta" || all[index - 1] !== "message.delta"
  );
}

/** The text of each run of consecutive deltas. */
function deltaSegments(events: RunEvent[]): string[] {
  const segments: string[] = [];
  let previous = "";
  for (const event of events) {
    if (event.type === "message.delta") {
      const text = (event.data.chunk as { content: string }).content;
      if (previous === "message.delta") segments[segments.length - 1] += text;
      else segments.push(text);
    }
    previous = event.type;
  }
  return segments;
}

function assertGapFree(events: RunEvent[]) {
  assert.deepEqual(
    events.map((event) => event.sequence),
    events.map((_, index) => index + 1),
  );
  const msgSequences = events.filter((e) => e.type === "message.delta").map(
    (e) => (e.data.chunk as { msg_sequence: number }).msg_sequence,
  );
  assert.deepEqual(msgSequences, msgSequences.map((_, index) => index + 1));
}

Deno.test("deltas around plans, tool calls, thoughts and permission requests keep the agent's text and order", async () => {
  await withHarness({}, async (h) => {
    const script = [
      ["text", "Hel"],
      ["text", "lo "],
      ["plan"],
      ["text", "wor"],
      ["tool", "t1"],
      ["text", "ld"],
      ["thought", "hmm"],
      ["text", "!"],
      ["permission"],
      ["text", " do"],
      ["text", "ne"],
    ];
    const { run } = await h.manager.start({
      input: { text: "go" },
      config: fixtureConfig(
        ["--script", JSON.stringify(script)],
        NO_SECRETS,
      ),
    });
    const log = new EventLog(run);
    assert.equal((await run.done).status, "completed");
    assert.deepEqual(collapsedTypes(log.events), [
      "run.started",
      "state.updated",
      "message.delta",
      "plan.updated",
      "message.delta",
      "tool.call.started",
      "tool.call.completed",
      "message.delta",
      "thought.delta",
      "message.delta",
      "permission.decided",
      "message.delta",
      "message.completed",
      "run.completed",
    ]);
    assert.deepEqual(deltaSegments(log.events), [
      "Hello ",
      "wor",
      "ld",
      "!",
      " done",
    ]);
    assertGapFree(log.events);
    assert.deepEqual(log.messages(), ["Hello world! done"]);
    assert.deepEqual(await h.store.getEvents(run.runId), log.events);
  });
});

Deno.test("chunks within the window become one delta, flushed before the turn ends and the terminal event", async () => {
  await withHarness({}, async (h) => {
    const { run } = await h.manager.start({
      input: { text: "go" },
      config: fixtureConfig(
        ["--text-parts", JSON.stringify(["a", "b", "c", "d"])],
        { ...NO_SECRETS, "delta-coalesce-ms": 10_000, "late-update-ms": 1 },
      ),
    });
    const log = new EventLog(run);
    assert.equal((await run.done).status, "completed");
    // The first chunk goes at once; the rest wait for the window, which the
    // end of the turn closes early.
    assert.deepEqual(deltaTexts(log.events), ["a", "bcd"]);
    assert.deepEqual(log.events.map((event) => event.type).slice(-3), [
      "message.delta",
      "message.completed",
      "run.completed",
    ]);
    assertGapFree(log.events);
    const full = log.events.map(createEventRestorer({ allContent: true }));
    assert.equal(
      (full.at(-2)!.data.message as { content: string }).content,
      "abcd",
    );
  });
});

Deno.test("a cancel in the middle of a pending batch loses no text and ends with one run.failed", async () => {
  const h = harness();
  const gate = await makeGate();
  try {
    const { run } = await h.manager.start({
      input: { text: "go" },
      config: fixtureConfig(
        [
          "--text-parts",
          JSON.stringify(["a", "b", "c"]),
          "--gate-fifo",
          gate.path,
          "--stall-prompt",
        ],
        { ...NO_SECRETS, "delta-coalesce-ms": 10_000 },
      ),
    });
    const log = new EventLog(run);
    await log.waitFor((event) => event.type === "message.delta");
    // The gate opens only once the agent has written every chunk and waits
    // (then it stalls until cancelled): "b" and "c" are in the window.
    await gate.release();
    run.handle.cancel();
    const result = await run.done;
    assert.equal(result.status, "cancelled");
    // The agent's chunks precede its answer to the cancel, so all of them
    // were read; the pending "bc" is flushed before the terminal event.
    assert.deepEqual(deltaTexts(log.events), ["a", "bc"]);
    assert.equal(log.events.at(-1)!.type, "run.failed");
    assert.equal(log.events.at(-1)!.data.code, "run.cancelled");
    assert.equal(
      log.events.filter((e) =>
        e.type === "run.failed" || e.type === "run.completed"
      ).length,
      1,
    );
    assertGapFree(log.events);
    assert.deepEqual(await h.store.getEvents(run.runId), log.events);
  } finally {
    await h.close();
  }
});

Deno.test("delta-coalesce-ms=0 gives one delta per chunk", async () => {
  await withHarness({}, async (h) => {
    const parts = ["one ", "two ", "three ", "four ", "five"];
    const { run } = await h.manager.start({
      input: { text: "go" },
      config: fixtureConfig(["--text-parts", JSON.stringify(parts)], {
        ...NO_SECRETS,
        "delta-coalesce-ms": 0,
      }),
    });
    const log = new EventLog(run);
    assert.equal((await run.done).status, "completed");
    assert.deepEqual(deltaTexts(log.events), parts);
    assertGapFree(log.events);
  });
});

Deno.test("five slow chunks still show as five deltas with the default window", async () => {
  const h = harness();
  const gate = await makeGate();
  try {
    const parts = ["1", "2", "3", "4", "5"];
    const { run } = await h.manager.start({
      input: { text: "go" },
      config: fixtureConfig([
        "--text-parts",
        JSON.stringify(parts),
        "--gate-fifo",
        gate.path,
        "--gate-chunks",
        // A delta that never comes ends the run (and this test) in 20 s.
      ], { ...NO_SECRETS, timeout: 20 }),
    });
    const log = new EventLog(run);
    // Each chunk after the first is sent only once the previous one has
    // arrived as a delta: nothing but the window's timer can flush it.
    for (let i = 1; i <= parts.length; i++) {
      await log.waitFor((event) =>
        event.type === "message.delta" &&
        deltaTexts(log.events).join("") === parts.slice(0, i).join("")
      );
      assert.ok(
        !log.events.some(isTerminalEvent),
        `chunk ${i} came out only with the end of the run`,
      );
      if (i < parts.length) await gate.release();
    }
    assert.equal((await run.done).status, "completed");
    assert.deepEqual(deltaTexts(log.events), parts);
  } finally {
    await h.close();
  }
});
