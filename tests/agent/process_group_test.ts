/**
 * Confirming that a run's process groups are gone, against real processes:
 * a group that still has a member after teardown is killed and then
 * confirmed gone, and an already empty group is confirmed as it is.
 */

import assert from "node:assert/strict";
import { confirmGroupsGone } from "../../lib/agent/process_group.ts";
import { processGroupMembers } from "../../lib/agent/process_table.ts";
import { ROOT, spawnSleeper } from "../helpers.ts";

Deno.test("confirmGroupsGone kills a group that outlived its teardown, then confirms it gone", async () => {
  const straggler = spawnSleeper({ ownGroup: true });
  const emptied = spawnSleeper({ ownGroup: true });
  try {
    emptied.kill("SIGKILL");
    await emptied.status;
    assert.notDeepEqual(await processGroupMembers(straggler.pid), []);
    const logged: Record<string, unknown>[] = [];
    const survivors: number[] = [];
    const confirmed = await confirmGroupsGone([emptied.pid, straggler.pid], {
      graceMs: 200,
      log: (entry) => logged.push(entry),
      survived: (pgid) => survivors.push(pgid),
    });
    assert.equal(confirmed, true);
    assert.deepEqual(await processGroupMembers(straggler.pid), []);
    assert.deepEqual(survivors, []);
    assert.deepEqual(logged, [
      { msg: "agent group still alive after teardown", pgid: straggler.pid },
    ]);
  } finally {
    try {
      straggler.kill("SIGKILL");
    } catch { /* already gone */ }
    await straggler.status;
  }
});

Deno.test("signalGroup signals nothing for a pgid that names no agent's group: 0 (its own group), NaN, or its own pid negated", async () => {
  // In a group of its own (setsid), so a signal that went out would end it
  // and nothing else.
  const script = [
    `import { signalGroup } from "${ROOT}lib/agent/process_group.ts";`,
    'for (const pgid of [0, Number.NaN, -Deno.pid, 1.5]) signalGroup(pgid, "SIGTERM");',
    'console.log("still alive");',
  ].join("\n");
  const { code, signal, stdout } = await new Deno.Command("setsid", {
    args: [Deno.execPath(), "eval", script],
    stdout: "piped",
    stderr: "inherit",
  }).output();
  assert.deepEqual(
    { code, signal, out: new TextDecoder().decode(stdout).trim() },
    { code: 0, signal: null, out: "still alive" },
  );
});
