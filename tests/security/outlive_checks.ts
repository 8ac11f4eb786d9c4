/**
 * The outlive attack (`tests/fixtures/attack_outlive.ts`) as every entrance
 * tries it: the agent and one of its terminal commands each double-fork a
 * sleeper into a session of their own (`setsid`), out of the process group
 * teardown kills; once the run's terminal event is out, none is left. The
 * sleepers are found by the marker in their environment.
 *
 * @module
 */

import assert from "node:assert/strict";
import { markedProcesses } from "../sandbox_helpers.ts";

/** A terminal command that leaves a sleeper in a session of its own and exits. */
export const SETSID_TERMINAL = {
  command: "sh",
  args: ["-c", "(setsid sleep 300 </dev/null >/dev/null 2>&1 &); echo left"],
};

/** The fixture flags of the attack: the agent's own sleeper and its terminal's. */
export const OUTLIVE_FLAGS: readonly string[] = [
  "--attack-outlive",
  "--terminal",
  JSON.stringify(SETSID_TERMINAL),
];

/** Asserts both sleepers were started (by `reply`) and none of the run's processes (by `marker`) is left. */
export function assertNothingOutlived(reply: string, marker: string): void {
  assert.match(reply, /\nattack-outlive: started/);
  assert.match(reply, /\nterminal 0: .*"output":"left\\n"/);
  const left = markedProcesses(marker);
  assert.deepEqual(left, [], `nothing outlives: ${commandLines(left)}`);
}

/** What each pid runs, for a failure's message. */
function commandLines(pids: number[]): string {
  return pids.map((pid) => {
    try {
      const line = Deno.readTextFileSync(`/proc/${pid}/cmdline`);
      return `${pid} ${line.replaceAll("\0", " ").slice(0, 200)}`;
    } catch {
      return `${pid} (gone)`;
    }
  }).join("; ");
}

export { killMarked } from "../sandbox_helpers.ts";
