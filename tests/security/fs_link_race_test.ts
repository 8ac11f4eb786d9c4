/**
 * The link race on the file boundary, as an attacker plays it: the fixture
 * agent swaps workspace directories between a real directory and a symbolic
 * link out of the workspace in a tight loop (a worker of its own process)
 * while it fires `fs/read_text_file`, `fs/write_text_file` and client
 * terminals through them (`tests/fixtures/attack_link_race.ts`). Unconfined
 * and confined, it reads no secret from outside, writes nothing outside, and
 * no command runs outside. The race lasts `LINK_RACE_SECONDS` (default 3; set
 * 30 for a long run by hand).
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import type { LinkRaceReport } from "../fixtures/attack_link_race.ts";
import { EventLog, fixtureConfig, harness } from "../engine_helpers.ts";
import { quoteCommand, splitCommand } from "../../lib/agent/shell_words.ts";
import { ROOT, tempDir } from "../helpers.ts";
import {
  confinedFixtureCommand,
  DENO_DIR,
  sandboxConfig,
  sandboxWorld,
} from "../sandbox_helpers.ts";

const SECONDS = Number(Deno.env.get("LINK_RACE_SECONDS") ?? "3");

/** The attacker's playground: a workspace with two swapped directories, and what lies outside. */
function raceWorld() {
  const workspace = Deno.realPathSync(tempDir("race-ws-"));
  const secret = `outside secret ${crypto.randomUUID()}`;
  // Outside: a directory with a secret (the read and cwd target) and an empty one (the write target).
  const secretDir = Deno.realPathSync(tempDir("race-secret-"));
  Deno.writeTextFileSync(join(secretDir, "data.txt"), secret);
  const emptyDir = Deno.realPathSync(tempDir("race-empty-"));
  const readDir = join(workspace, "race");
  const writeDir = join(workspace, "race-w");
  Deno.mkdirSync(readDir);
  Deno.mkdirSync(writeDir);
  Deno.writeTextFileSync(join(readDir, "data.txt"), "inside data");
  const attack = {
    swaps: [
      { path: readDir, target: secretDir },
      { path: writeDir, target: emptyDir },
    ],
    reads: [join(readDir, "data.txt")],
    writeDirs: [writeDir],
    terminalCwds: [readDir],
    seconds: SECONDS,
  };
  return { workspace, secret, secretDir, emptyDir, attack };
}

type RaceWorld = ReturnType<typeof raceWorld>;

/** The run's keys besides the agent: files and terminals on. */
function raceKeys(world: RaceWorld): Record<string, unknown> {
  return {
    workspace: world.workspace,
    "fs-read": true,
    "fs-write": true,
    "client-terminals": true,
    "terminal-timeout": 30,
  };
}

function inside(workspace: string, path: string): boolean {
  return path === workspace || path.startsWith(`${workspace}/`);
}

/** Asserts what the attacker got and what it left: nothing from outside, nothing outside. */
function assertHeld(world: RaceWorld, log: EventLog): void {
  const reply = log.messages().join("\n");
  const line = reply.split("\n").find((text) => text.startsWith("link-race: "));
  assert.ok(line, `the attack reported: ${reply.slice(0, 500)}`);
  const report = JSON.parse(line.slice("link-race: ".length)) as LinkRaceReport;
  // The race ran: directories were swapped and the boundary served the real ones.
  assert.ok(report.swaps > 0, line);
  assert.ok(report.reads.ok > 0, line);
  assert.ok(report.writes.ok > 0, line);
  assert.ok(report.terminals.ran > 0, line);
  assert.deepEqual(report.reads.contents, ["inside data"], line);
  assert.ok(
    !JSON.stringify(log.events).includes(world.secret),
    "the secret is in no event",
  );
  assert.deepEqual(
    [...Deno.readDirSync(world.emptyDir)].map((entry) => entry.name),
    [],
    "nothing was written outside",
  );
  assert.deepEqual(
    [...Deno.readDirSync(world.secretDir)].map((entry) => entry.name),
    ["data.txt"],
  );
  assert.equal(
    Deno.readTextFileSync(join(world.secretDir, "data.txt")),
    world.secret,
  );
  const ranIn = [
    ...report.terminals.cwds,
    ...log.ofType("terminal.output").map((event) =>
      String(event.data.output).trim()
    ),
  ];
  // `pwd -P` printed a path; anything else is a refusal's message.
  const outside = ranIn.filter((cwd) =>
    cwd.startsWith("/") && !inside(world.workspace, cwd)
  );
  assert.deepEqual(outside, [], "no command ran outside the workspace");
  assert.ok(ranIn.includes(join(world.workspace, "race")), line);
}

Deno.test("link race, unconfined: fs reads, fs writes and terminal cwds never leave the workspace", async () => {
  const world = raceWorld();
  const h = harness();
  try {
    const { run } = await h.manager.start({
      input: { text: "race" },
      config: fixtureConfig(
        ["--attack-link-race", JSON.stringify(world.attack)],
        raceKeys(world),
      ),
    });
    const log = new EventLog(run);
    await run.done;
    assert.equal(log.ofType("run.completed").length, 1);
    assertHeld(world, log);
  } finally {
    await h.close();
  }
});

Deno.test("link race, sandbox=confined: fs reads, fs writes and terminal cwds never leave the workspace", async () => {
  const world = raceWorld();
  const sandbox = sandboxWorld();
  const h = harness({ environment: sandbox.environment });
  try {
    const { run } = await h.manager.start({
      input: { text: "race" },
      config: sandboxConfig(sandbox, [], {
        ...raceKeys(world),
        // The flag holds JSON: quoted as one word.
        "acp-command": quoteCommand([
          ...splitCommand(confinedFixtureCommand()),
          "--attack-link-race",
          JSON.stringify(world.attack),
        ]),
        // The secret's directory is in the agent's view: a command that
        // lands there would run.
        "sandbox-read-paths": [ROOT, DENO_DIR, world.secretDir],
      }),
    });
    const log = new EventLog(run);
    await run.done;
    assert.equal(
      log.ofType("run.completed").length,
      1,
      JSON.stringify(log.ofType("run.failed")),
    );
    assertHeld(world, log);
  } finally {
    await h.close();
  }
});
