/**
 * The link race on the file boundary, as an attacker plays it: the fixture
 * agent swaps workspace directories between a real directory and a symbolic
 * link out of the workspace in a tight loop (a worker of its own process)
 * while it fires `fs/read_text_file`, `fs/write_text_file` and client
 * terminals through them (`tests/fixtures/attack_link_race.ts`). Unconfined
 * and confined, through `runner run` (the binary's permission set), it reads
 * no secret from outside, writes nothing outside, and no command runs
 * outside. The race lasts `LINK_RACE_SECONDS` (default 3; set
 * 30 for a long run by hand).
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import type { LinkRaceReport } from "../fixtures/attack_link_race.ts";
import type { RunEvent } from "../../lib/events.ts";
import { quoteCommand, splitCommand } from "../../lib/agent/shell_words.ts";
import {
  fixtureCommand,
  parseJsonLines,
  ROOT,
  runCli,
  tempDir,
} from "../helpers.ts";
import {
  confinedFixtureCommand,
  DENO_DIR,
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

function inside(workspace: string, path: string): boolean {
  return path === workspace || path.startsWith(`${workspace}/`);
}

/** Asserts what the attacker got and what it left: nothing from outside, nothing outside. */
function assertHeld(world: RaceWorld, events: RunEvent[]): void {
  const reply = events.filter((event) => event.type === "message.completed")
    .map((event) => (event.data.message as { content: string }).content)
    .join("\n");
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
    !JSON.stringify(events).includes(world.secret),
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
    ...events.filter((event) => event.type === "terminal.output")
      .map((event) => String(event.data.output).trim()),
  ];
  // `pwd -P` printed a path; anything else is a refusal's message.
  const outside = ranIn.filter((cwd) =>
    cwd.startsWith("/") && !inside(world.workspace, cwd)
  );
  assert.deepEqual(outside, [], "no command ran outside the workspace");
  assert.ok(ranIn.includes(join(world.workspace, "race")), line);
}

interface RunOutcome {
  code: number;
  stderr: string;
  events: RunEvent[];
}

/** `runner run --json` (the binary's permission set) with the attacker and run-config `keys`. */
async function runAttack(
  world: RaceWorld,
  options: {
    agent: string[];
    keys?: Record<string, string>;
    env?: Record<string, string>;
  },
): Promise<RunOutcome> {
  const result = await runCli([
    "run",
    "custom",
    "--acp-command",
    quoteCommand([
      ...options.agent,
      "--attack-link-race",
      JSON.stringify(world.attack),
    ]),
    "--workspace",
    world.workspace,
    "--fs-read",
    "true",
    "--fs-write",
    "true",
    "--client-terminals",
    "true",
    "--terminal-timeout",
    "30",
    "--langbot-assets-enabled",
    "false",
    ...Object.entries(options.keys ?? {}).flatMap((
      [key, value],
    ) => [`--${key}`, value]),
    "--json",
    "race",
  ], { env: options.env });
  return {
    code: result.code,
    stderr: result.stderr,
    events: parseJsonLines(result.stdout) as unknown as RunEvent[],
  };
}

Deno.test("runner run, unconfined: under a link race fs reads, fs writes and terminal cwds never leave the workspace", async () => {
  const world = raceWorld();
  const run = await runAttack(world, {
    agent: splitCommand(fixtureCommand()),
  });
  assert.equal(run.code, 0, run.stderr);
  assertHeld(world, run.events);
});

Deno.test("runner run, sandbox=confined: under a link race fs reads, fs writes and terminal cwds never leave the workspace", async () => {
  const world = raceWorld();
  const sandbox = sandboxWorld();
  const run = await runAttack(world, {
    agent: splitCommand(confinedFixtureCommand()),
    keys: {
      sandbox: "confined",
      // The secret's directory is in the agent's view: a command that
      // lands there would run.
      "sandbox-read-paths": `${ROOT},${DENO_DIR},${world.secretDir}`,
      "env-json": JSON.stringify({ DENO_DIR }),
    },
    env: sandbox.environment,
  });
  assert.equal(run.code, 0, run.stderr);
  assertHeld(world, run.events);
});
