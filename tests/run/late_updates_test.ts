import assert from "node:assert/strict";
import { join } from "node:path";
import {
  customRunArgs,
  fixtureCommand,
  runJsonEvents,
  tempDir,
} from "../helpers.ts";

/** `runner run --json` with the fixture; returns the events. */
async function run(fixtureFlags: string[], ...extra: string[]) {
  const events = await runJsonEvents(
    customRunArgs(
      fixtureCommand("--text", "main", ...fixtureFlags),
      join(tempDir(), "ws"),
      ["--data-dir", tempDir(), "--json", ...extra, "hi"],
    ),
  );
  assert.equal(events.at(-1)!.type, "run.completed");
  const completed = events.filter((e) => e.type === "message.completed");
  assert.equal(completed.length, 1);
  return (completed[0].data as { message: { content: string } }).message
    .content;
}

Deno.test("late updates that keep coming after the answer all reach it, bursts included", async () => {
  // The first right after the answer, then gaps of 5 to 800 ms (each well
  // under late-update-ms, 2000, so a loaded machine's late timers cannot
  // stretch one past it), past late-update-ms after the answer in all.
  const offsets = [0, 0, 0, 5, 40, 40, 40, 600, 1300, 2100, 2100];
  assert.equal(
    await run(
      ["--late-update-at", offsets.join(",")],
      "--late-update-ms",
      "2000",
    ),
    "main" + offsets.map((ms) => `late@${ms}`).join(""),
  );
});

Deno.test("a burst of late updates, one per macrotask, reaches the answer", async () => {
  const burst = Array.from({ length: 50 }, (_, i) => `late-${i + 1}`);
  // A window far above a macrotask's gap, even on a loaded machine.
  assert.equal(
    await run(["--late-updates", "50"], "--late-update-ms", "2000"),
    "main" + burst.join(""),
  );
});

Deno.test("a turn without late updates is not held for late-update-ms", async () => {
  // Nothing follows the answer until 2.5 s later, half of late-update-ms: a
  // wait of late-update-ms would take that update into the answer. The turn
  // ends after a short quiet window instead and the agent is gone by then.
  assert.equal(
    await run(["--late-update-at", "2500"], "--late-update-ms", "5000"),
    "main",
  );
});
