/**
 * The file boundary's own answers (`lib/acp/confined_files.ts`), as the
 * agent gets them from `readInside` and `writeInside`: what is not a file or
 * not there; a file the system never lets be opened (immutable, leased) is
 * refused with what the system said and nothing changes; writes replace
 * existing files whole and ask the permission check with the real path; and
 * under a directory swapped with a link out in a tight loop (the attacker's
 * race, in the test's own process) nothing outside is read or written.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import * as acp from "@agentclientprotocol/sdk";
import { readInside, writeInside } from "../../lib/acp/confined_files.ts";
import { tempDir } from "../helpers.ts";

/** The attacker's loop (`deno eval`, `$1` the directory, `$2` the link's target): the directory flips to a link and back, forever. */
const SWAP_LOOP = `
const [path, target] = Deno.args;
console.log("swapping");
for (;;) {
  try {
    Deno.renameSync(path, path + ".real");
    Deno.symlinkSync(target, path);
    Deno.removeSync(path);
    Deno.renameSync(path + ".real", path);
  } catch {
    // Keeps flipping.
  }
}
`;

/** The first line `reader` gives (what a helper process says once it is ready). */
async function firstLine(
  reader: ReadableStreamDefaultReader<string>,
): Promise<string> {
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) break;
    text += value;
  }
  return text.split("\n")[0];
}

/** The error `promise` rejects with, as a `RequestError`. */
async function refusal(promise: Promise<unknown>): Promise<acp.RequestError> {
  const error = await promise.then(
    () => assert.fail("it was not refused"),
    (error) => error,
  );
  assert.ok(error instanceof acp.RequestError, String(error));
  return error;
}

/** Runs `chattr` (root on a file system with attributes, as the tests' machine). */
function chattr(flag: "+i" | "-i", ...paths: string[]): void {
  const result = new Deno.Command("chattr", { args: [flag, ...paths] })
    .outputSync();
  assert.ok(result.success, new TextDecoder().decode(result.stderr));
}

/** Whether this machine lets the tests make a file immutable (root, a file system with attributes). */
function immutableFilesWork(): boolean {
  if (Deno.uid() !== 0) return false;
  const probe = Deno.makeTempFileSync();
  try {
    const set = new Deno.Command("chattr", { args: ["+i", probe] })
      .outputSync();
    if (!set.success) return false;
    new Deno.Command("chattr", { args: ["-i", probe] }).outputSync();
    return true;
  } catch {
    return false; // no chattr
  } finally {
    Deno.removeSync(probe);
  }
}

Deno.test({
  name:
    "writeInside: a file the system never lets be opened is refused with what the system said; nothing changes",
  ignore: !immutableFilesWork(),
  fn: async () => {
    const root = Deno.realPathSync(tempDir());
    Deno.writeTextFileSync(join(root, "kept.txt"), "as it was");
    Deno.mkdirSync(join(root, "locked"));
    chattr("+i", join(root, "kept.txt"), join(root, "locked"));
    try {
      for (
        const [path, name] of [["kept.txt", "kept.txt"], [
          "locked/new.txt",
          "new.txt",
        ]]
      ) {
        const error = await refusal(
          writeInside({ root, full: join(root, path), path, content: "new" }),
        );
        assert.equal(error.code, -32602);
        assert.deepEqual(error.data, { path });
        assert.equal(
          error.message,
          `Invalid params: the file kept changing while it was opened (failed to open './${name}': Operation not permitted)`,
        );
      }
      assert.equal(
        Deno.readTextFileSync(join(root, "kept.txt")),
        "as it was",
      );
      assert.deepEqual([...Deno.readDirSync(join(root, "locked"))], []);
      assert.equal(
        await readInside(root, join(root, "kept.txt"), "kept.txt"),
        "as it was",
      );
    } finally {
      chattr("-i", join(root, "kept.txt"), join(root, "locked"));
    }
  },
});

/**
 * Holds a write lease on `file` (python3's `fcntl`; root may lease any file)
 * until the returned function is called: meanwhile every non-blocking open
 * of it fails ("Resource temporarily unavailable").
 */
async function leased(file: string): Promise<() => Promise<void>> {
  const holder = new Deno.Command("python3", {
    args: ["-c", LEASE_HOLDER, file],
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const said = holder.stdout.pipeThrough(new TextDecoderStream()).getReader();
  assert.equal(await firstLine(said), "leased");
  return async () => {
    await holder.stdin.close();
    await said.cancel();
    assert.ok((await holder.status).success);
  };
}

/** Takes a write lease (`F_SETLEASE`, `F_WRLCK`) on `argv[1]`, says so, and keeps it until stdin closes. */
const LEASE_HOLDER = `
import fcntl, os, signal, sys
signal.signal(signal.SIGIO, signal.SIG_IGN)
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.fcntl(fd, 1024, fcntl.F_WRLCK)
print("leased", flush=True)
sys.stdin.read()
`;

Deno.test({
  name:
    "readInside: a file that never opens (another process holds a lease on it) is refused with what the system said",
  ignore: Deno.uid() !== 0,
  fn: async () => {
    const root = Deno.realPathSync(tempDir());
    Deno.writeTextFileSync(join(root, "held.txt"), "held");
    const release = await leased(join(root, "held.txt"));
    try {
      const error = await refusal(
        readInside(root, join(root, "held.txt"), "held.txt"),
      );
      assert.deepEqual([error.code, error.data, error.message], [
        -32602,
        { path: "held.txt" },
        "Invalid params: the file kept changing while it was opened (failed to open './held.txt': Resource temporarily unavailable)",
      ]);
    } finally {
      await release();
    }
    assert.equal(
      await readInside(root, join(root, "held.txt"), "held.txt"),
      "held",
    );
  },
});

Deno.test("readInside and writeInside: what is not a file, or not there, is refused as such; outside stays outside", async () => {
  const root = Deno.realPathSync(tempDir());
  const away = Deno.realPathSync(tempDir());
  Deno.mkdirSync(join(root, "dir"));
  Deno.writeTextFileSync(join(root, "file.txt"), "inside");
  new Deno.Command("mkfifo", { args: [join(root, "fifo")] }).outputSync();
  Deno.symlinkSync(away, join(root, "link-out"));
  Deno.symlinkSync(join(root, "nothing.txt"), join(root, "dangling"));
  Deno.symlinkSync("loop", join(root, "loop"));

  const read = (path: string) =>
    refusal(readInside(root, join(root, path), path));
  const write = (path: string) =>
    refusal(writeInside({ root, full: join(root, path), path, content: "x" }));
  const expect = (error: acp.RequestError, code: number, message: string) =>
    assert.deepEqual([error.code, error.message], [code, message]);
  const invalid = (reason: string) => `Invalid params: ${reason}`;
  const notFound = (path: string) => `Resource not found: ${path}`;

  expect(await read("dir"), -32602, invalid("path is a directory"));
  expect(await read("fifo"), -32602, invalid("path is not a regular file"));
  expect(await write("dir"), -32602, invalid("path is a directory"));
  expect(await read("missing.txt"), -32002, notFound("missing.txt"));
  expect(
    await read("no/such/dir/file.txt"),
    -32002,
    notFound("no/such/dir/file.txt"),
  );
  expect(
    await write("no/such/dir/file.txt"),
    -32002,
    notFound("no/such/dir/file.txt"),
  );
  expect(
    await read("link-out/missing.txt"),
    -32602,
    invalid("path is outside the workspace"),
  );
  expect(
    await write("link-out/no-dir/new.txt"),
    -32602,
    invalid("path is outside the workspace"),
  );
  expect(
    await write("dangling"),
    -32602,
    invalid("path is a symbolic link to a missing file"),
  );
  // The agent's own path comes back with every refusal.
  for (
    const path of ["dir", "link-out/missing.txt", "loop", "a\0b", "\ud800"]
  ) {
    assert.deepEqual((await read(path)).data, { path }, JSON.stringify(path));
  }
  assert.deepEqual((await write("dangling")).data, { path: "dangling" });
  expect(
    await read("loop"),
    -32602,
    invalid("path cannot be used: a symbolic link on its way loops"),
  );
  assert.deepEqual([...Deno.readDirSync(away)], []);
  assert.throws(() => Deno.lstatSync(join(root, "nothing.txt")));
});

Deno.test("writeInside: an existing file is replaced whole, through a link inside too; a new one is created; the permission check sees the real path", async () => {
  const root = Deno.realPathSync(tempDir());
  Deno.mkdirSync(join(root, "sub"));
  Deno.writeTextFileSync(join(root, "sub", "long.txt"), "a long old content");
  Deno.symlinkSync(join(root, "sub"), join(root, "link-in"));
  Deno.symlinkSync(join(root, "sub", "long.txt"), join(root, "file-link"));
  const asked: string[] = [];
  const write = (path: string, content: string, allow = true) =>
    writeInside({
      root,
      full: join(root, path),
      path,
      content,
      mayWrite: (real) => {
        asked.push(real);
        return allow;
      },
    });

  await write("link-in/long.txt", "short");
  assert.equal(Deno.readTextFileSync(join(root, "sub", "long.txt")), "short");
  await write("file-link", "via a file link");
  assert.equal(
    Deno.readTextFileSync(join(root, "sub", "long.txt")),
    "via a file link",
  );
  assert.ok(Deno.lstatSync(join(root, "file-link")).isSymlink);
  await write("link-in/long.txt", "short");
  await write("link-in/new.txt", "brand new");
  assert.equal(
    Deno.readTextFileSync(join(root, "sub", "new.txt")),
    "brand new",
  );
  await write("top.txt", "at the top");
  assert.equal(Deno.readTextFileSync(join(root, "top.txt")), "at the top");
  assert.deepEqual(asked, [
    join(root, "sub", "long.txt"),
    join(root, "sub", "long.txt"),
    join(root, "sub", "long.txt"),
    join(root, "sub", "new.txt"),
    join(root, "top.txt"),
  ]);

  const refused = await refusal(write("link-in/long.txt", "changed", false));
  assert.equal(
    refused.message,
    "Invalid params: the run's permission rules reject this write",
  );
  assert.deepEqual(refused.data, { path: "link-in/long.txt" });
  await refusal(write("sub/refused.txt", "created", false));
  assert.equal(Deno.readTextFileSync(join(root, "sub", "long.txt")), "short");
  assert.throws(() => Deno.statSync(join(root, "sub", "refused.txt")));
  assert.equal(
    await readInside(root, join(root, "link-in", "new.txt"), "link-in/new.txt"),
    "brand new",
  );
});

Deno.test("readInside and writeInside under a link race: a directory swapped with a link out in a tight loop never lets a read or a write through to outside", async () => {
  const root = Deno.realPathSync(tempDir());
  const away = Deno.realPathSync(tempDir());
  const secret = `outside secret ${crypto.randomUUID()}`;
  Deno.writeTextFileSync(join(away, "file.txt"), secret);
  Deno.mkdirSync(join(root, "d"));
  Deno.writeTextFileSync(join(root, "d", "file.txt"), "inside");
  // The attacker: `d` flips between the real directory and a link to `away`.
  const swapper = new Deno.Command(Deno.execPath(), {
    args: ["eval", SWAP_LOOP, join(root, "d"), away],
    stdin: "null",
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const said = swapper.stdout.pipeThrough(new TextDecoderStream()).getReader();
  assert.equal(await firstLine(said), "swapping");
  const outcomes = { read: 0, written: 0, refused: 0 };
  try {
    const attempt = async (index: number) => {
      try {
        const text = await readInside(
          root,
          join(root, "d", "file.txt"),
          "d/file.txt",
        );
        assert.notEqual(text, secret, "the outside file was read");
        outcomes.read++;
      } catch (error) {
        assert.ok(error instanceof acp.RequestError, String(error));
        outcomes.refused++;
      }
      const path = `d/new-${index}.txt`;
      try {
        await writeInside({ root, full: join(root, path), path, content: "" });
        outcomes.written++;
      } catch (error) {
        assert.ok(error instanceof acp.RequestError, String(error));
        outcomes.refused++;
      }
    };
    // At least 250 rounds, and on until the directory was found real at
    // least 40 times while racing (a loaded machine may starve the
    // attacker for a while); at most 3000 rounds.
    for (
      let round = 0;
      round < 3000 &&
      (round < 250 || outcomes.read + outcomes.written < 40);
      round++
    ) {
      await Promise.all([0, 1, 2, 3].map((lane) => attempt(round * 4 + lane)));
    }
  } finally {
    swapper.kill("SIGKILL");
    await swapper.status;
    await said.cancel();
  }
  assert.deepEqual([...Deno.readDirSync(away)].map((entry) => entry.name), [
    "file.txt",
  ], "nothing was written outside");
  assert.equal(Deno.readTextFileSync(join(away, "file.txt")), secret);
  assert.ok(
    outcomes.refused > 0,
    `the race was run: ${JSON.stringify(outcomes)}`,
  );
});
