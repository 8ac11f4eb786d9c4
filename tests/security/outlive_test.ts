/**
 * Attacks on teardown (`docs/teardown.md`): an agent (`--attack-outlive`,
 * `tests/fixtures/attack_outlive.ts`) or one of its terminal commands
 * double-forks a process into a session of its own (`setsid`), out of the
 * process group that teardown kills, unconfined (`sandbox=off`) and
 * confined. When the run's terminal event is out, none of them is left —
 * also when the runner itself is killed with SIGKILL. Through a run of the
 * engine (what `runner run` runs), `runner run` itself, a caller's run on
 * `runner serve` and a hub's job on `runner daemon`. The escaped processes
 * are found by a marker in their environment. Needs bwrap; fails (never
 * skips) without it.
 */

import assert from "node:assert/strict";
import { parseRunConfig } from "../../lib/config.ts";
import { harness, runCompleted } from "../engine_helpers.ts";
import { ROOT, spawnCli, tempDir } from "../helpers.ts";
import {
  assertKilledRunnerLeavesNothing,
  DENO_DIR,
  keysAsFlags,
  markedGone,
  markedProcesses,
  sandboxKeys,
  type SandboxWorld,
  sandboxWorld,
} from "../sandbox_helpers.ts";
import {
  attackDaemon,
  attackerCommand,
  attackServe,
  callerRun,
  replyOf,
} from "./entrances.ts";
import {
  assertNothingOutlived,
  killMarked,
  OUTLIVE_FLAGS,
} from "./outlive_checks.ts";

/** Run-config keys of a fixture run in `world` whose flags may hold JSON. */
function attackKeys(
  world: SandboxWorld,
  flags: string[],
  extra: Record<string, unknown>,
): Record<string, unknown> {
  return {
    ...sandboxKeys(world, [], extra),
    "acp-command": attackerCommand(...flags),
  };
}

for (const sandbox of ["off", "confined"]) {
  Deno.test(`sandbox=${sandbox}: what the agent and a terminal command double-fork into sessions of their own is gone when the run ends`, async () => {
    const world = sandboxWorld();
    const h = harness({ environment: world.environment });
    try {
      const config = parseRunConfig(attackKeys(
        world,
        [...OUTLIVE_FLAGS],
        {
          sandbox,
          "client-terminals": true,
          "langbot-assets-enabled": false,
        },
      ));
      const log = await runCompleted(h.manager, {
        input: { text: "hi" },
        config,
      });
      assertNothingOutlived(log.messages()[0], world.marker);
    } finally {
      await h.close();
      killMarked(world.marker);
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
  const child = spawnCli([
    "run",
    ...keysAsFlags(keys),
    "--langbot-assets-enabled",
    "false",
    "--json",
    "hi",
  ], { env: world.environment });
  await assertKilledRunnerLeavesNothing(child, {
    marker: world.marker,
    until: "attack-outlive: started",
    whileAlive() {
      // The agent's sleeper, the terminal's, and the terminal command itself.
      const sleepers = markedProcesses(world.marker).filter((pid) =>
        Deno.readTextFileSync(`/proc/${pid}/cmdline`).startsWith(
          "sleep\u0000300",
        )
      );
      assert.equal(sleepers.length, 3, `sleepers: ${sleepers}`);
    },
  });
});

/** The operator's flags of a runner whose runs are `sandbox`, with client terminals. */
function outliveOperatorFlags(sandbox: string): string[] {
  return [
    ...["--client-terminals", "true"],
    ...(sandbox === "confined"
      ? [
        ...["--sandbox", "confined", "--sandbox-network", "none"],
        ...["--sandbox-read-paths", `${ROOT},${DENO_DIR}`],
      ]
      : []),
  ];
}

/** The operator's agent environment: the marker every process of the run keeps. */
function markerEnv(world: SandboxWorld): string[] {
  return [
    "--env-json",
    JSON.stringify({ DENO_DIR, SANDBOX_TEST_MARK: world.marker }),
  ];
}

/** Operator's `workspace-roots` with a caller's workspace in it. */
function rootsWithWorkspace(): { roots: string; workspace: string } {
  const roots = tempDir("outlive-roots-");
  const workspace = `${roots}/ws`;
  Deno.mkdirSync(workspace);
  return { roots, workspace };
}

/**
 * Asserts a kept (warm) agent's run left one sleeper: the terminal
 * command's went with the command; the agent's own lives on with the warm
 * agent, in its PID namespace.
 */
function assertOnlyTheAgentsSleeper(marker: string): void {
  const sleepers = markedProcesses(marker).filter((pid) =>
    Deno.readTextFileSync(`/proc/${pid}/cmdline`).startsWith("sleep\u0000300")
  );
  assert.equal(sleepers.length, 1, `sleepers: ${sleepers}`);
}

/**
 * Runs a warm run (`run` returns its events), asserts it completed and left
 * only {@linkcode assertOnlyTheAgentsSleeper}, then kills its host (`kill`,
 * a `kill -9`) and asserts nothing marked is left; kills what is, always.
 */
async function warmLeftoversDieWithHost(
  marker: string,
  run: () => Promise<{ type: string }[]>,
  kill: () => Promise<unknown>,
): Promise<void> {
  try {
    try {
      const events = await run();
      assert.equal(events.at(-1)?.type, "run.completed");
      assertOnlyTheAgentsSleeper(marker);
    } finally {
      await kill();
    }
    assert.deepEqual(await markedGone(marker), []);
  } finally {
    killMarked(marker);
  }
}

/** A caller's run config of the outliving attacker in `workspace`. */
function outliveConfig(workspace: string): Record<string, unknown> {
  return {
    provider: "custom",
    "acp-command": attackerCommand(...OUTLIVE_FLAGS),
    workspace,
  };
}

/** A fresh world and workspace, and a `runner serve` whose runs are `sandbox`, marked. */
async function outliveServe(sandbox: string) {
  const world = sandboxWorld();
  const { roots, workspace } = rootsWithWorkspace();
  const serve = await attackServe({
    args: [
      ...outliveOperatorFlags(sandbox),
      ...["--workspace-roots", roots],
      ...markerEnv(world),
    ],
    environment: world.environment,
  });
  return { world, workspace, serve };
}

/** A fresh world and workspace, and a `runner daemon` whose runs are `sandbox`, marked; `daemonArgs` added. */
async function outliveDaemon(sandbox: string, daemonArgs: string[] = []) {
  const world = sandboxWorld();
  const { roots, workspace } = rootsWithWorkspace();
  const daemon = await attackDaemon({
    hubArgs: ["--client-terminals", "true", ...markerEnv(world)],
    daemonArgs: [
      ...outliveOperatorFlags(sandbox),
      ...["--workspace-roots", roots],
      ...daemonArgs,
    ],
    environment: world.environment,
  });
  return { world, workspace, daemon };
}

for (const sandbox of ["off", "confined"]) {
  Deno.test(`runner serve, sandbox=${sandbox}: what a caller's agent and its terminal command double-fork into sessions of their own is gone when the run's terminal event is out`, async () => {
    const { world, workspace, serve } = await outliveServe(sandbox);
    try {
      const events = await callerRun(serve, outliveConfig(workspace));
      assert.equal(events.at(-1)?.type, "run.completed");
      assertNothingOutlived(replyOf(events), world.marker);
    } finally {
      await serve.stop();
      killMarked(world.marker);
    }
  });

  Deno.test(`runner serve, sandbox=${sandbox}: a conversation's warm agent keeps only itself and its own leftovers, and a kill -9 of runner serve takes them down`, async () => {
    const { world, workspace, serve } = await outliveServe(sandbox);
    await warmLeftoversDieWithHost(
      world.marker,
      () =>
        callerRun(serve, outliveConfig(workspace), {
          conversation_id: `outlive-${world.marker}`,
        }),
      () => serve.stop("SIGKILL"),
    );
  });

  Deno.test(`runner daemon, sandbox=${sandbox}: what a hub job's agent and its terminal command double-fork into sessions of their own is gone when the run's terminal event is out`, async () => {
    // The agent is not kept warm: the run's end is its end.
    const { world, workspace, daemon } = await outliveDaemon(sandbox, [
      "--max-warm-agents",
      "0",
    ]);
    try {
      const events = await daemon.run(outliveConfig(workspace));
      assert.equal(events.at(-1)?.type, "run.completed");
      assertNothingOutlived(replyOf(events), world.marker);
    } finally {
      assert.equal(await daemon.stop(), 0, daemon.logs());
      killMarked(world.marker);
    }
  });

  Deno.test(`runner daemon, sandbox=${sandbox}: a warm agent keeps only itself and its own leftovers, and a kill -9 of the daemon takes them down`, async () => {
    const { world, workspace, daemon } = await outliveDaemon(sandbox);
    await warmLeftoversDieWithHost(
      world.marker,
      () => daemon.run(outliveConfig(workspace)),
      () => daemon.stop("SIGKILL"),
    );
  });
}
