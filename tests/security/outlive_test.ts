/**
 * Attacks on teardown (`docs/teardown.md`): an agent (`--attack-outlive`,
 * `tests/fixtures/attack_outlive.ts`) or one of its terminal commands
 * double-forks a process into a session of its own (`setsid`), out of the
 * process group that teardown kills, unconfined (`sandbox=off`) and
 * confined. When the run's terminal event is out, none of them is left —
 * also when the runner itself is killed with SIGKILL. The escaped processes
 * are found by a marker in their environment. Needs bwrap; fails (never
 * skips) without it.
 */

import assert from "node:assert/strict";
import { quoteCommand } from "../../lib/agent/shell_words.ts";
import { parseRunConfig } from "../../lib/config.ts";
import { EventLog, harness } from "../engine_helpers.ts";
import { spawnCli } from "../helpers.ts";
import {
  confinedFixtureCommand,
  markedGone,
  markedProcesses,
  sandboxKeys,
  type SandboxWorld,
  sandboxWorld,
} from "../sandbox_helpers.ts";

/** A terminal command that leaves a sleeper in a session of its own and exits. */
const SETSID_TERMINAL = {
  command: "sh",
  args: ["-c", "(setsid sleep 300 </dev/null >/dev/null 2>&1 &); echo left"],
};

/** Run-config keys of a fixture run in `world` whose flags may hold JSON. */
function attackKeys(
  world: SandboxWorld,
  flags: string[],
  extra: Record<string, unknown>,
): Record<string, unknown> {
  return {
    ...sandboxKeys(world, [], extra),
    "acp-command": quoteCommand([
      ...confinedFixtureCommand().split(" "),
      ...flags,
    ]),
  };
}

for (const sandbox of ["off", "confined"]) {
  Deno.test(`sandbox=${sandbox}: what the agent and a terminal command double-fork into sessions of their own is gone when the run ends`, async () => {
    const world = sandboxWorld();
    const h = harness({ environment: world.environment });
    try {
      const config = parseRunConfig(attackKeys(
        world,
        ["--attack-outlive", "--terminal", JSON.stringify(SETSID_TERMINAL)],
        {
          sandbox,
          "client-terminals": true,
          "langbot-assets-enabled": false,
        },
      ));
      const { run } = await h.manager.start({ input: { text: "hi" }, config });
      const log = new EventLog(run);
      assert.equal(
        (await run.done).status,
        "completed",
        JSON.stringify(log.events.at(-1)),
      );
      const reply = log.messages()[0];
      assert.match(reply, /\nattack-outlive: started/);
      assert.match(reply, /\nterminal 0: .*"output":"left\\n"/);
      assert.deepEqual(markedProcesses(world.marker), [], "nothing outlives");
    } finally {
      await h.close();
      for (const pid of markedProcesses(world.marker)) {
        Deno.kill(pid, "SIGKILL");
      }
    }
  });
}

Deno.test("sandbox=off: kill -9 of runner run takes what its agent and a running terminal command left in sessions of their own down with it", async () => {
  const world = sandboxWorld();
  const keys = attackKeys(world, [
    "--attack-outlive",
    "--terminal",
    JSON.stringify({
      command: "sh",
      args: [
        "-c",
        "(setsid sleep 300 </dev/null >/dev/null 2>&1 &); echo left; exec sleep 300",
      ],
      wait: false,
    }),
    "--stall-prompt",
  ], { sandbox: "off", "client-terminals": true });
  const { provider, ...rest } = keys;
  const child = spawnCli([
    "run",
    String(provider),
    ...Object.entries(rest).flatMap(([key, value]) => [
      `--${key}`,
      Array.isArray(value)
        ? value.join(",")
        : typeof value === "object"
        ? JSON.stringify(value)
        : String(value),
    ]),
    "--langbot-assets-enabled",
    "false",
    "--json",
    "hi",
  ], { env: world.environment });
  try {
    const reader = child.stdout.pipeThrough(new TextDecoderStream())
      .getReader();
    let seen = "";
    while (!seen.includes("attack-outlive: started")) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`runner run ended early: ${seen}`);
      seen += value;
    }
    // The agent's sleeper, the terminal's, and the terminal command itself.
    const sleepers = markedProcesses(world.marker).filter((pid) =>
      Deno.readTextFileSync(`/proc/${pid}/cmdline`).startsWith("sleep\u0000300")
    );
    assert.equal(sleepers.length, 3, `sleepers: ${sleepers}`);
    child.kill("SIGKILL");
    await child.status;
    reader.cancel().catch(() => {});
    assert.deepEqual(await markedGone(world.marker), []);
  } finally {
    try {
      child.kill("SIGKILL");
    } catch { /* already gone */ }
    await child.stderr.cancel().catch(() => {});
    for (const pid of markedProcesses(world.marker)) {
      Deno.kill(pid, "SIGKILL");
    }
  }
});
