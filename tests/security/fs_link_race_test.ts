/**
 * The link race on the file boundary, as an attacker plays it: the fixture
 * agent swaps workspace directories between a real directory and a symbolic
 * link out of the workspace in a tight loop (a worker of its own process)
 * while it fires `fs/read_text_file`, `fs/write_text_file` and client
 * terminals through them (`tests/fixtures/attack_link_race.ts`). Unconfined
 * and confined, through `runner run` (the binary's permission set), a
 * caller's run on `runner serve` and a hub's job on `runner daemon`, it reads
 * no secret from outside, writes nothing outside, and no command runs
 * outside (`link_race_checks.ts`).
 *
 * @module
 */

import assert from "node:assert/strict";
import type { RunEvent } from "../../lib/events.ts";
import { customRunArgs, parseJsonLines, ROOT, runCli } from "../helpers.ts";
import { DENO_DIR, sandboxWorld } from "../sandbox_helpers.ts";
import {
  attackDaemon,
  attackerCommand,
  attackServe,
  callerRun,
} from "./entrances.ts";
import {
  assertHeld,
  raceFlags,
  type RaceWorld,
  raceWorld,
} from "./link_race_checks.ts";

interface RunOutcome {
  code: number;
  stderr: string;
  events: RunEvent[];
}

/** `runner run --json` (the binary's permission set) with the attacker, unconfined or confined. */
async function runAttack(
  world: RaceWorld,
  sandbox: string,
): Promise<RunOutcome> {
  const result = await runCli(
    customRunArgs(attackerCommand(...raceFlags(world)), world.workspace, [
      ...raceOperatorFlags(world, sandbox),
      ...["--env-json", JSON.stringify({ DENO_DIR })],
      "--langbot-assets-enabled",
      "false",
      "--json",
      "race",
    ]),
    { env: sandboxWorld().environment },
  );
  return {
    code: result.code,
    stderr: result.stderr,
    events: parseJsonLines(result.stdout) as unknown as RunEvent[],
  };
}

/** The operator's flags that serve the attacker's fs/* and terminals, confined or not. */
function raceOperatorFlags(world: RaceWorld, sandbox: string): string[] {
  return [
    ...["--fs-read", "true", "--fs-write", "true"],
    ...["--client-terminals", "true", "--terminal-timeout", "30"],
    ...(sandbox === "confined"
      ? [
        ...["--sandbox", "confined"],
        // The secret's directory is in the agent's view: a command that
        // lands there would run.
        ...["--sandbox-read-paths", `${ROOT},${DENO_DIR},${world.secretDir}`],
      ]
      : []),
  ];
}

/**
 * Has `run` (a caller's or a hub's) start the attacker in the race's
 * workspace; checks that the run completed and held.
 */
async function assertCallerRaceHeld(
  world: RaceWorld,
  run: (config: Record<string, unknown>) => Promise<RunEvent[]>,
): Promise<void> {
  const events = await run({
    provider: "custom",
    "acp-command": attackerCommand(...raceFlags(world)),
    workspace: world.workspace,
  });
  assert.equal(events.at(-1)?.type, "run.completed");
  assertHeld(world, events);
}

for (const sandbox of ["off", "confined"]) {
  const how = sandbox === "off" ? "unconfined" : `sandbox=${sandbox}`;
  Deno.test(`runner run, ${how}: under a link race fs reads, fs writes and terminal cwds never leave the workspace`, async () => {
    const world = raceWorld();
    const run = await runAttack(world, sandbox);
    assert.equal(run.code, 0, run.stderr);
    assertHeld(world, run.events);
  });

  Deno.test(`runner serve, ${how}: under a caller's link race fs reads, fs writes and terminal cwds never leave the workspace`, async () => {
    const world = raceWorld();
    const serve = await attackServe({
      args: [
        ...raceOperatorFlags(world, sandbox),
        ...["--workspace-roots", world.roots],
        ...["--env-json", JSON.stringify({ DENO_DIR })],
      ],
      environment: sandboxWorld().environment,
    });
    try {
      await assertCallerRaceHeld(world, (config) => callerRun(serve, config));
    } finally {
      await serve.stop();
    }
  });

  Deno.test(`runner daemon, ${how}: under a hub job's link race fs reads, fs writes and terminal cwds never leave the workspace`, async () => {
    const world = raceWorld();
    const daemon = await attackDaemon({
      // The hub's operator turns them on; the daemon's own flags decide.
      hubArgs: [
        ...["--fs-read", "true", "--fs-write", "true"],
        ...["--client-terminals", "true"],
        ...["--env-json", JSON.stringify({ DENO_DIR })],
      ],
      daemonArgs: [
        ...raceOperatorFlags(world, sandbox),
        ...["--workspace-roots", world.roots],
      ],
      environment: sandboxWorld().environment,
    });
    try {
      await assertCallerRaceHeld(world, (config) => daemon.run(config));
    } finally {
      assert.equal(await daemon.stop(), 0, daemon.logs());
    }
  });
}
