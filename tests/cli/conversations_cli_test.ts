/**
 * `runner conversations list|show|export|import` on the local store: a
 * conversation `runner run` kept, read as Markdown, exported and imported
 * into a fresh data dir as the same transcript; a foreign file or a second
 * import refused with nothing changed; bad invocations exit 2.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { fixtureRunArgsIn, runCli, tempDir } from "../helpers.ts";

function conversations(dataDir: string, ...args: string[]) {
  return runCli(["conversations", ...args, "--data-dir", dataDir]);
}

Deno.test("runner conversations: list, show, export, then import into a fresh data dir gives the same transcript", async () => {
  const source = tempDir();
  for (const prompt of ["first question", "second question"]) {
    const run = await runCli(fixtureRunArgsIn(
      source,
      ["--rich-updates", "--usage", "turn"],
      "--conversation",
      "cli-conv",
      prompt,
    ));
    assert.equal(run.code, 0, run.stderr);
  }
  const listed = await conversations(source, "list", "--json");
  assert.equal(listed.code, 0, listed.stderr);
  assert.deepEqual(
    JSON.parse(listed.stdout).map((row: Record<string, unknown>) => [
      row.conversation_id,
      row.runs,
      row.last_status,
    ]),
    [["cli-conv", 2, "completed"]],
  );
  const shown = await conversations(source, "show", "cli-conv");
  assert.equal(shown.code, 0, shown.stderr);
  assert.match(shown.stdout, /^# Conversation cli-conv$/m);
  assert.match(shown.stdout, /> second question/);
  assert.match(shown.stdout, /echo: second question/);
  assert.match(shown.stdout, /\*\*Tool call\*\* `Read README` — completed/);
  assert.match(shown.stdout, /Usage: prompt_tokens 100/);

  const file = join(tempDir(), "cli-conv.json");
  const exported = await conversations(
    source,
    "export",
    "cli-conv",
    "--output",
    file,
  );
  assert.equal(exported.code, 0, exported.stderr);
  const target = tempDir();
  const imported = await conversations(target, "import", file);
  assert.equal(imported.code, 0, imported.stderr);
  assert.match(imported.stdout, /Imported 2 run\(s\)/);
  const strip = (markdown: string) =>
    markdown.replace(/, exported [^\n]+\./, ".");
  const again = await conversations(target, "show", "cli-conv");
  assert.equal(strip(again.stdout), strip(shown.stdout));

  // A second import of the same file: refused, exit 1, nothing changes.
  const twice = await conversations(target, "import", file);
  assert.equal(twice.code, 1);
  assert.match(
    twice.stderr,
    /^error \[http\.conflict\]: Runs .* are already stored/,
  );
  const foreign = join(tempDir(), "foreign.json");
  await Deno.writeTextFile(
    foreign,
    JSON.stringify({ format: "other", version: 1, runs: [] }),
  );
  const refused = await conversations(tempDir(), "import", foreign);
  assert.equal(refused.code, 2);
  assert.match(
    refused.stderr,
    /error \[http\.bad_request\]: .*not a runner-transcript/,
  );
  const listedAfter = await conversations(target, "list", "--json");
  assert.equal(JSON.parse(listedAfter.stdout)[0].runs, 2);
});

Deno.test("runner conversations: bad invocations exit 2 and point at --help; an unknown id exits 1", async () => {
  const dataDir = tempDir();
  for (
    const args of [
      [],
      ["drop"],
      ["show"],
      ["export", "a", "b"],
      ["list", "--limit", "0"],
      ["list", "--bogus"],
    ]
  ) {
    const result = await conversations(dataDir, ...args);
    assert.equal(result.code, 2, `${args.join(" ")}: ${result.stderr}`);
    assert.match(result.stderr, /see runner conversations --help/);
  }
  const help = await runCli(["conversations", "--help"]);
  assert.equal(help.code, 0);
  assert.match(help.stdout, /runner conversations import FILE/);
  const missing = await conversations(dataDir, "show", "nobody");
  assert.equal(missing.code, 1);
  assert.match(
    missing.stderr,
    /error \[http\.not_found\]: Conversation nobody/,
  );
});
