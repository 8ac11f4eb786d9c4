/**
 * Hostile file names on the file boundary, as an attacker agent sends them
 * (`tests/fixtures/attack_file_names.ts`): `fs/*` opens files through a shell
 * helper and `dd` (`lib/acp/confined_files.ts`), so every name the agent
 * controls is an argument there. Quotes, newlines, leading dashes, `$()`,
 * backticks, globs, `dd` operands (`of=…`, `conv=…`), control characters and
 * the longest name a file can have are each written and read back as exactly
 * that file with exactly that content, and nothing else is made anywhere;
 * names no file can have (NUL, a lone surrogate, too long), link loops and
 * names that are not UTF-8 are refused as invalid params without the
 * runner's paths in the message; a link out of the workspace answers
 * "outside" whether or not the file behind it exists (no oracle of the
 * host's files). Unconfined and confined, through `runner run`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import type { RunEvent } from "../../lib/events.ts";
import type {
  CallOutcome,
  FileNamesAttack,
  FileNamesReport,
} from "../fixtures/attack_file_names.ts";
import { parseJsonLines, ROOT, runCli, tempDir } from "../helpers.ts";
import { DENO_DIR, sandboxWorld } from "../sandbox_helpers.ts";
import { attackerCommand, replyOf } from "./entrances.ts";

/** Names any file may have: each must become exactly that file. */
const ORDINARY = [
  "a'b",
  'a"b',
  "new\nline",
  "trailing newline\n",
  "-n",
  "--help",
  "$(touch pwned-dollar)",
  "`touch pwned-tick`",
  "*",
  "[ab]",
  "?",
  "of=written-elsewhere",
  "if=secret.txt",
  "conv=notrunc",
  "bs=1",
  "status=progress",
  "iflag=nofollow",
  "a b  c",
  "\t",
  "\r",
  "~",
  "a;b|c&d>e",
  "\\",
  "=",
  "-",
  "é ü 中文 🙂",
  "x".repeat(255),
];

/** Names no file may have, or that lead nowhere usable: refused. */
const REFUSED = {
  tooLong: "y".repeat(256),
  nul: "a\u0000b",
  loneSurrogate: "lone \ud800 surrogate",
  loop: "loop",
  loopBelow: "loop/below",
  notUtf8: "to-bad",
};

/** The attacker's world: a workspace with links, and a secret outside. */
function namesWorld() {
  const roots = Deno.realPathSync(tempDir("names-roots-"));
  const workspace = join(roots, "ws");
  Deno.mkdirSync(workspace);
  const outside = Deno.realPathSync(tempDir("names-outside-"));
  const secret = `outside secret ${crypto.randomUUID()}`;
  Deno.writeTextFileSync(join(outside, "secret.txt"), secret);
  Deno.symlinkSync(outside, join(workspace, "link-out"));
  Deno.symlinkSync("loop", join(workspace, "loop"));
  // A file whose name is not UTF-8 (the agent can make one with its shell),
  // and a link to it.
  Deno.mkdirSync(join(workspace, "bad"));
  const made = new Deno.Command("sh", {
    args: ["-c", `printf inside > "$(printf 'bad/f\\377')"`],
    cwd: workspace,
  }).outputSync();
  assert.ok(made.success);
  new Deno.Command("sh", {
    args: ["-c", `ln -s "$(printf 'bad/f\\377')" to-bad`],
    cwd: workspace,
  }).outputSync();
  const attack: FileNamesAttack = {
    names: ORDINARY,
    writes: [
      ...Object.values(REFUSED),
      "link-out/new.txt",
      "link-out/no-dir/new.txt",
      "../beside-the-workspace.txt",
    ],
    reads: [
      ...Object.values(REFUSED),
      "link-out/secret.txt",
      "link-out/missing.txt",
      "link-out/no-dir/missing.txt",
      "../missing.txt",
      "missing-here.txt",
    ],
  };
  return { roots, workspace, outside, secret, attack };
}

type NamesWorld = ReturnType<typeof namesWorld>;

async function attackNames(
  world: NamesWorld,
  sandbox: "off" | "confined",
): Promise<{ report: FileNamesReport; events: RunEvent[] }> {
  const result = await runCli([
    "run",
    "custom",
    "--acp-command",
    attackerCommand("--attack-file-names", JSON.stringify(world.attack)),
    "--workspace",
    world.workspace,
    ...["--fs-read", "true", "--fs-write", "true"],
    ...(sandbox === "confined"
      ? [
        ...["--sandbox", "confined", "--sandbox-network", "none"],
        ...["--sandbox-read-paths", `${ROOT},${DENO_DIR}`],
      ]
      : []),
    ...["--env-json", JSON.stringify({ DENO_DIR })],
    ...["--langbot-assets-enabled", "false"],
    "--json",
    "names",
  ], { env: sandboxWorld().environment });
  assert.equal(result.code, 0, result.stderr);
  const events = parseJsonLines(result.stdout) as unknown as RunEvent[];
  const line = replyOf(events).split("\n")
    .find((text) => text.startsWith("file-names: "));
  assert.ok(line, `the attack reported: ${replyOf(events).slice(0, 500)}`);
  return {
    report: JSON.parse(line.slice("file-names: ".length)),
    events,
  };
}

/** An answer that refused with `code` (-32602 invalid params, -32002 not found), saying nothing of where things are. */
function assertRefused(
  world: NamesWorld,
  what: string,
  answer: CallOutcome | undefined,
  expected: { code: number; message: RegExp },
): void {
  assert.ok(answer && !answer.ok, `${what}: ${JSON.stringify(answer)}`);
  assert.equal(answer.code, expected.code, `${what}: ${answer.message}`);
  assert.match(answer.message ?? "", expected.message, what);
  assert.ok(
    !answer.message?.includes(world.roots),
    `${what} names the runner's paths: ${answer.message}`,
  );
}

function assertHeld(
  world: NamesWorld,
  { report, events }: { report: FileNamesReport; events: RunEvent[] },
): void {
  // Every ordinary name is exactly that file, with exactly its content.
  for (const name of ORDINARY) {
    const content = `content of ${name}`;
    assert.deepEqual(report.writes[name], { ok: true, content: "" }, name);
    assert.deepEqual(report.reads[name], { ok: true, content }, name);
    assert.equal(
      Deno.readTextFileSync(join(world.workspace, name)),
      content,
      JSON.stringify(name),
    );
  }
  // And nothing else was made: no `pwned-*`, no `written-elsewhere`.
  assert.deepEqual(
    [...Deno.readDirSync(world.workspace)].map((entry) => entry.name).sort(),
    [...ORDINARY, "link-out", "loop", "bad", "to-bad"].sort(),
  );
  assert.deepEqual(
    [...Deno.readDirSync(world.outside)].map((entry) => entry.name),
    ["secret.txt"],
  );
  assert.deepEqual(
    [...Deno.readDirSync(world.roots)].map((entry) => entry.name),
    ["ws"],
  );
  assert.ok(!JSON.stringify(events).includes(world.secret));

  const invalid = (message: RegExp) => ({ code: -32602, message });
  const outside = invalid(/^Invalid params: path is outside the workspace$/);
  for (const [kind, name] of Object.entries(REFUSED)) {
    const message = {
      tooLong: /^Invalid params: path cannot be used: File name too long/,
      nul: /^Invalid params: path contains a NUL character$/,
      loneSurrogate: /^Invalid params: path is not valid Unicode/,
      loop: /^Invalid params: path cannot be used: a symbolic link .* loops$/,
      loopBelow:
        /^Invalid params: path cannot be used: a symbolic link .* loops$/,
      notUtf8: /^Invalid params: path cannot be used: .* not valid UTF-8$/,
    }[kind]!;
    assertRefused(
      world,
      `write ${kind}`,
      report.writes[name],
      invalid(message),
    );
    assertRefused(world, `read ${kind}`, report.reads[name], invalid(message));
  }
  // The file behind a link out, there or not: the same answer.
  for (
    const path of [
      "link-out/secret.txt",
      "link-out/missing.txt",
      "link-out/no-dir/missing.txt",
      "../missing.txt",
    ]
  ) assertRefused(world, `read ${path}`, report.reads[path], outside);
  for (
    const path of [
      "link-out/new.txt",
      "link-out/no-dir/new.txt",
      "../beside-the-workspace.txt",
    ]
  ) assertRefused(world, `write ${path}`, report.writes[path], outside);
  assertRefused(world, "read missing", report.reads["missing-here.txt"], {
    code: -32002,
    message: /^Resource not found/,
  });
}

for (const sandbox of ["off", "confined"] as const) {
  const how = sandbox === "off" ? "unconfined" : "sandbox=confined";
  Deno.test(`runner run, ${how}: hostile file names through fs/* are each exactly their own file, or refused without the runner's paths`, async () => {
    const world = namesWorld();
    assertHeld(world, await attackNames(world, sandbox));
  });
}
