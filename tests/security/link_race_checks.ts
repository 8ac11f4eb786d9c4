/**
 * The link race on the file boundary (`tests/fixtures/attack_link_race.ts`)
 * as every entrance tries it: the attacker's playground (a workspace under
 * operator's roots with two directories it swaps for links out, a secret and
 * an empty directory outside) and what must hold afterwards (nothing read
 * from outside, nothing written outside, no command ran outside). The race
 * lasts `LINK_RACE_SECONDS` (default 3; set 30 for a long run by hand).
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import type { LinkRaceReport } from "../fixtures/attack_link_race.ts";
import type { RunEvent } from "../../lib/events.ts";
import { tempDir } from "../helpers.ts";
import { replyOf } from "./entrances.ts";

const SECONDS = Number(Deno.env.get("LINK_RACE_SECONDS") ?? "3");

/** The attacker's playground: a workspace (under roots) with two swapped directories, and what lies outside. */
export function raceWorld() {
  // Roots an operator may name: nothing of the runner's is in them.
  const roots = Deno.realPathSync(tempDir("race-roots-"));
  const workspace = join(roots, "ws");
  Deno.mkdirSync(workspace);
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
  return { roots, workspace, secret, secretDir, emptyDir, attack };
}

/** One {@linkcode raceWorld}. */
export type RaceWorld = ReturnType<typeof raceWorld>;

function inside(workspace: string, path: string): boolean {
  return path === workspace || path.startsWith(`${workspace}/`);
}

/** Asserts what the attacker got and what it left: nothing from outside, nothing outside. */
export function assertHeld(world: RaceWorld, events: RunEvent[]): void {
  const reply = replyOf(events);
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

/** The fixture flags of the attack on `world`. */
export function raceFlags(world: RaceWorld): string[] {
  return ["--attack-link-race", JSON.stringify(world.attack)];
}
