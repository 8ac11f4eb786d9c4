/**
 * The `fs/*` handlers and a terminal's cwd (`lib/acp/fs.ts`), as the agent
 * sees them. A cwd (`confineDirectory`) is an existing directory inside the
 * workspace by real path, relative names taken from the workspace; a link
 * inside that leads elsewhere inside is followed, one out is refused as
 * outside, a file or a missing name is no cwd. `fs/read_text_file`'s `line`
 * and `limit` give those lines; each of `fs-read` and `fs-write` serves its
 * own method only; the workspace is the real directory it was when the run
 * started, whatever its name leads to later.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import * as acp from "@agentclientprotocol/sdk";
import { confineDirectory } from "../../lib/acp/fs.ts";
import { EventLog, fixtureConfig, harness } from "../engine_helpers.ts";
import { tempDir } from "../helpers.ts";

/** The refusal `confineDirectory` answers for `path`, as the agent sees it. */
async function refusal(root: string, path: string): Promise<string> {
  const error = await confineDirectory(root, path).then(
    () => assert.fail(`${path} was accepted`),
    (error) => error,
  );
  assert.ok(error instanceof acp.RequestError, String(error));
  assert.equal(error.code, -32602, "invalid params");
  assert.deepEqual(error.data, { path });
  return error.message;
}

Deno.test("confineDirectory: a directory inside by real path is the cwd; outside, missing and non-directories are refused", async () => {
  const root = Deno.realPathSync(tempDir());
  const outsideDir = Deno.realPathSync(tempDir());
  Deno.mkdirSync(join(root, "sub", "deeper"), { recursive: true });
  Deno.writeTextFileSync(join(root, "file.txt"), "a file");
  Deno.symlinkSync(join(root, "sub"), join(root, "link-in"));
  Deno.symlinkSync(outsideDir, join(root, "link-out"));
  Deno.symlinkSync(join(root, "nowhere"), join(root, "dangling"));
  Deno.symlinkSync("loop", join(root, "loop"));

  assert.equal(await confineDirectory(root, "."), root);
  assert.equal(await confineDirectory(root, ""), root);
  assert.equal(await confineDirectory(root, "sub"), join(root, "sub"));
  assert.equal(
    await confineDirectory(root, join(root, "sub", "deeper")),
    join(root, "sub", "deeper"),
  );
  assert.equal(
    await confineDirectory(root, "link-in/deeper"),
    join(root, "sub", "deeper"),
    "a link inside is followed to its real path",
  );
  assert.equal(
    await confineDirectory(root, "sub/../sub"),
    join(root, "sub"),
  );

  for (const path of ["link-out", "..", outsideDir, "/", "sub/../.."]) {
    assert.match(await refusal(root, path), /outside the workspace/, path);
  }
  // Names that cannot be looked up get the same answer, never the system's
  // message with the runner's paths.
  for (
    const path of [
      "file.txt",
      "missing",
      "dangling",
      "sub/missing",
      "file.txt/sub",
      "loop",
      "y".repeat(300),
    ]
  ) {
    assert.match(
      await refusal(root, path),
      /cwd is not a directory in the workspace/,
      path,
    );
  }
});

/** The fixture's `fs-read-range N: …` lines, by N. */
function rangeReport(text: string): string[] {
  const report: string[] = [];
  for (const line of text.split("\n")) {
    const match = /^fs-read-range (\d+): (.*)$/.exec(line);
    if (match) {
      report[Number(match[1])] = match[2].startsWith("error ")
        ? match[2]
        : JSON.parse(match[2]);
    }
  }
  return report;
}

/** The agent's reply to one prompt of a run with `flags` and `fs` access. */
async function fsRun(
  workspace: string,
  flags: string[],
  access: { "fs-read"?: boolean; "fs-write"?: boolean },
): Promise<string> {
  const { manager, close } = harness();
  try {
    const { run } = await manager.start({
      input: { text: "use the files" },
      config: fixtureConfig(flags, { workspace, ...access }),
    });
    const log = new EventLog(run);
    await run.done;
    return log.messages().join("\n");
  } finally {
    await close();
  }
}

Deno.test("fs/read_text_file: line and limit give the agent those lines of the file, from line 1 when line is absent", async () => {
  const workspace = tempDir();
  Deno.writeTextFileSync(join(workspace, "lines.txt"), "one\ntwo\nthree\nfour");
  const ranges = [
    { line: 2, limit: 2 },
    { line: 3 },
    { limit: 1 },
    { line: 1, limit: 3 },
    { line: 4, limit: 10 },
    { line: 9 },
  ];
  const reply = await fsRun(
    workspace,
    ranges.flatMap((range) => [
      "--fs-read-range",
      JSON.stringify({ path: join(workspace, "lines.txt"), ...range }),
    ]),
    { "fs-read": true },
  );
  assert.deepEqual(rangeReport(reply), [
    "two\nthree",
    "three\nfour",
    "one",
    "one\ntwo\nthree",
    "four",
    "",
  ]);
});

Deno.test("fs: with only fs-write the agent cannot read, with only fs-read it cannot write", async () => {
  const workspace = tempDir();
  Deno.writeTextFileSync(join(workspace, "inside.txt"), "inside text");
  const flags = [
    ...["--fs-read", join(workspace, "inside.txt")],
    ...["--fs-write", join(workspace, "new.txt")],
  ];
  const writeOnly = await fsRun(workspace, flags, { "fs-write": true });
  assert.match(writeOnly, /^fs-read \S+inside\.txt: error /m);
  assert.match(writeOnly, /^fs-write \S+new\.txt: ok$/m);
  Deno.removeSync(join(workspace, "new.txt"));

  const readOnly = await fsRun(workspace, flags, { "fs-read": true });
  assert.match(readOnly, /^fs-read \S+inside\.txt: inside text$/m);
  assert.match(readOnly, /^fs-write \S+new\.txt: error /m);
  assert.throws(() => Deno.statSync(join(workspace, "new.txt")));
});

Deno.test("fs: the workspace is where it was when the run started: its name swapped for a link out afterwards moves nothing", async () => {
  const base = Deno.realPathSync(tempDir());
  const inside = join(base, "inside");
  const away = join(base, "away");
  Deno.mkdirSync(inside);
  Deno.mkdirSync(away);
  Deno.writeTextFileSync(join(away, "secret.txt"), "outside secret");
  const workspace = join(base, "ws");
  Deno.symlinkSync(inside, workspace);
  // The attacker swaps the workspace's name once the run has started (its
  // real path taken), before the agent calls fs.
  let swapped = false;
  const { manager, close } = harness({
    onAppend: (event) => {
      if (event.type !== "run.started" || swapped) return;
      Deno.removeSync(workspace);
      Deno.symlinkSync(away, workspace);
      swapped = true;
    },
  });
  try {
    const { run } = await manager.start({
      input: { text: "use the files" },
      config: fixtureConfig([
        ...["--fs-read", join(away, "secret.txt")],
        ...["--fs-read", join(workspace, "secret.txt")],
      ], { workspace, "fs-read": true }),
    });
    const log = new EventLog(run);
    await run.done;
    assert.ok(swapped);
    const reply = log.messages().join("\n");
    assert.ok(!reply.includes("outside secret"), reply);
    assert.match(reply, /^fs-read \S+away\/secret\.txt: error .*outside/m);
    assert.match(reply, /^fs-read \S+ws\/secret\.txt: error .*outside/m);
  } finally {
    await close();
  }
});
