/**
 * The `fs/*` capabilities as a real agent uses them: the fixture agent calls
 * `fs/read_text_file` and `fs/write_text_file` inside and outside its
 * workspace, through symlinks that point out of it, and on names that merely
 * start with dots. Also: no `fs` for remote-ssh runs, and the message of an
 * agent that dies without a word on stderr.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { parseRunConfig } from "../../lib/config.ts";
import { RunnerError } from "../../lib/errors.ts";
import { EventLog, fixtureConfig, harness } from "../engine_helpers.ts";
import { tempDir } from "../helpers.ts";

/** The fixture's report lines, `PATH` → what happened. */
function fsReport(text: string, kind: "fs-read" | "fs-write") {
  const report = new Map<string, string>();
  for (const line of text.split("\n")) {
    const match = line.match(new RegExp(`^${kind} (.+?): (.*)$`));
    if (match) report.set(match[1], match[2]);
  }
  return report;
}

Deno.test("fs reads and writes stay inside the workspace by real path; symlinks cannot lead out; ..names are names", async () => {
  const outside = tempDir();
  await Deno.writeTextFile(join(outside, "secret.txt"), "outside secret");
  const ws = tempDir();
  await Deno.mkdir(join(ws, "sub"));
  await Deno.writeTextFile(join(ws, "inside.txt"), "inside text");
  await Deno.writeTextFile(join(ws, "..foo"), "dot name");
  await Deno.writeTextFile(join(ws, "sub", "x.txt"), "via inner link");
  await Deno.symlink(outside, join(ws, "link-out"));
  await Deno.symlink(join(outside, "secret.txt"), join(ws, "file-out"));
  await Deno.symlink(join(ws, "sub"), join(ws, "link-in"));
  await Deno.symlink(join(outside, "missing.txt"), join(ws, "dangling"));

  const reads = {
    inside: join(ws, "inside.txt"),
    dots: join(ws, "..foo"),
    innerLink: join(ws, "link-in", "x.txt"),
    dirLinkOut: join(ws, "link-out", "secret.txt"),
    fileLinkOut: join(ws, "file-out"),
    dotDot: join(ws, "..", outside.split("/").at(-1)!, "secret.txt"),
    system: "/etc/hostname",
  };
  const writes = {
    inside: join(ws, "new.txt"),
    dots: join(ws, "..bar"),
    dirLinkOut: join(ws, "link-out", "planted.txt"),
    fileLinkOut: join(ws, "file-out"),
    dangling: join(ws, "dangling"),
  };
  const { manager, close } = harness();
  try {
    const { run } = await manager.start({
      input: { text: "use the files" },
      config: fixtureConfig([
        ...Object.values(reads).flatMap((path) => ["--fs-read", path]),
        ...Object.values(writes).flatMap((path) => ["--fs-write", path]),
      ], { workspace: ws, "fs-read": true, "fs-write": true }),
    });
    const log = new EventLog(run);
    await run.done;
    const reply = log.messages().join("\n");
    const read = fsReport(reply, "fs-read");
    assert.equal(read.get(reads.inside), "inside text");
    assert.equal(read.get(reads.dots), "dot name");
    assert.equal(read.get(reads.innerLink), "via inner link");
    for (
      const path of [
        reads.dirLinkOut,
        reads.fileLinkOut,
        reads.dotDot,
        reads.system,
      ]
    ) {
      assert.match(read.get(path)!, /^error .*outside the workspace/, path);
    }
    const written = fsReport(reply, "fs-write");
    assert.equal(written.get(writes.inside), "ok");
    assert.equal(written.get(writes.dots), "ok");
    assert.equal(
      await Deno.readTextFile(writes.inside),
      "written by the fixture",
    );
    assert.equal(
      await Deno.readTextFile(writes.dots),
      "written by the fixture",
    );
    assert.match(
      written.get(writes.dirLinkOut)!,
      /^error .*outside the workspace/,
    );
    assert.match(
      written.get(writes.fileLinkOut)!,
      /^error .*outside the workspace/,
    );
    assert.match(written.get(writes.dangling)!, /^error .*missing file/);
    assert.deepEqual(
      [...Deno.readDirSync(outside)].map((entry) => entry.name),
      ["secret.txt"],
      "nothing was created outside",
    );
    assert.equal(
      await Deno.readTextFile(join(outside, "secret.txt")),
      "outside secret",
    );
  } finally {
    await close();
  }
});

Deno.test("without fs-read and fs-write the agent's fs calls are refused", async () => {
  const ws = tempDir();
  await Deno.writeTextFile(join(ws, "inside.txt"), "inside text");
  const { manager, close } = harness();
  try {
    const { run } = await manager.start({
      input: { text: "use the files" },
      config: fixtureConfig([
        "--fs-read",
        join(ws, "inside.txt"),
        "--fs-write",
        join(ws, "new.txt"),
      ], { workspace: ws }),
    });
    const log = new EventLog(run);
    await run.done;
    const reply = log.messages().join("\n");
    assert.match(
      fsReport(reply, "fs-read").get(join(ws, "inside.txt"))!,
      /^error/,
    );
    assert.match(
      fsReport(reply, "fs-write").get(join(ws, "new.txt"))!,
      /^error/,
    );
    assert.throws(() => Deno.statSync(join(ws, "new.txt")));
  } finally {
    await close();
  }
});

Deno.test("fs-read and fs-write are refused for remote-ssh runs (they would serve the runner's own files)", () => {
  for (const key of ["fs-read", "fs-write"]) {
    assert.throws(
      () =>
        parseRunConfig({
          provider: "codex",
          location: "remote-ssh",
          "ssh-target": "dev@example.test",
          [key]: true,
        }),
      (error) => {
        assert.ok(error instanceof RunnerError);
        assert.equal(error.code, "config.invalid");
        assert.match(error.message, new RegExp(`^${key}: .*remote-ssh`));
        return true;
      },
    );
  }
});

Deno.test("an agent that dies without writing to stderr is reported without pointing at a stderr that is not there", async () => {
  const { manager, close } = harness();
  try {
    const { run } = await manager.start({
      input: { text: "hi" },
      config: fixtureConfig(["--exit-silently"]),
    });
    const log = new EventLog(run);
    await run.done;
    const failed = log.ofType("run.failed")[0];
    assert.equal(failed.data.code, "acp.process_exited");
    assert.doesNotMatch(String(failed.data.error), /stderr below/);
    assert.match(String(failed.data.error), /wrote nothing to stderr/);
    assert.equal(failed.data.stderr_tail, undefined);
  } finally {
    await close();
  }
});
