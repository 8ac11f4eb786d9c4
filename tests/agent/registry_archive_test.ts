import assert from "node:assert/strict";
import { join } from "node:path";
import { RunnerError } from "../../lib/errors.ts";
import {
  type ArchiveKind,
  unpackAgent,
} from "../../lib/agent/registry/unpack.ts";
import { tempDir } from "../helpers.ts";
import { gzip, tarOf, type TestMember, zipOf } from "./registry_archives.ts";

const SMALL = { maxBytes: 64 * 1024, maxEntries: 50 };

/** Unpacks into `<fresh>/inst/files`; returns the fresh directory and the outcome. */
async function unpack(
  kind: ArchiveKind,
  bytes: Uint8Array,
  cmd = "bin/agent",
) {
  const base = tempDir();
  await Deno.mkdir(join(base, "inst"));
  const into = join(base, "inst", "files");
  try {
    const unpacked = await unpackAgent({
      bytes,
      kind,
      into,
      cmd,
      limits: SMALL,
    });
    return { base, into, unpacked, error: undefined };
  } catch (error) {
    return { base, into, unpacked: undefined, error };
  }
}

function assertRefused(error: unknown, mentions: RegExp): void {
  assert.ok(error instanceof RunnerError, `refused: ${error}`);
  assert.equal(error.code, "agent.archive_refused");
  assert.equal(error.retryable, false);
  assert.match(error.message, mentions);
}

/** Every path under `dir`, relative. */
function listing(dir: string, prefix = ""): string[] {
  const names: string[] = [];
  for (const entry of Deno.readDirSync(dir)) {
    names.push(prefix + entry.name);
    if (entry.isDirectory) {
      names.push(...listing(join(dir, entry.name), `${prefix}${entry.name}/`));
    }
  }
  return names.sort();
}

const AGENT: TestMember = {
  name: "bin/agent",
  content: "#!/bin/sh\necho hi\n",
  mode: 0o644,
};

async function tarGz(members: TestMember[]) {
  return await gzip(tarOf(members));
}

Deno.test("a well-formed .tar.gz unpacks: directories, files, an inside link, a hard link, the program's run bit", async () => {
  const bytes = await tarGz([
    { name: "./bin/", kind: "dir" },
    AGENT,
    { name: "lib/data.txt", content: "data" },
    { name: "lib/alias.txt", kind: "symlink", target: "data.txt" },
    { name: "bin/up.txt", kind: "symlink", target: "../lib/data.txt" },
    { name: "lib/copy.txt", kind: "hardlink", target: "lib/data.txt" },
  ]);
  const { into, unpacked, error } = await unpack("tar.gz", bytes);
  assert.equal(error, undefined);
  assert.equal(unpacked!.program, join(into, "bin/agent"));
  assert.equal(Deno.statSync(unpacked!.program).mode! & 0o111, 0o111);
  assert.equal(Deno.readTextFileSync(join(into, "lib/alias.txt")), "data");
  assert.equal(Deno.readTextFileSync(join(into, "bin/up.txt")), "data");
  assert.equal(Deno.readTextFileSync(join(into, "lib/copy.txt")), "data");
});

Deno.test("a .tar.gz with a ../ entry is refused and writes nothing outside", async () => {
  const bytes = await tarGz([AGENT, {
    name: "../../escaped",
    content: "x",
  }]);
  const { base, error } = await unpack("tar.gz", bytes);
  assertRefused(error, /leads outside its directory \(\.\.\)/);
  assert.deepEqual(listing(base), ["inst"]);
});

Deno.test("a .tar.gz with an absolute path is refused", async () => {
  const { base, error } = await unpack(
    "tar.gz",
    await tarGz([AGENT, { name: "/tmp/escaped", content: "x" }]),
  );
  assertRefused(error, /absolute path/);
  assert.deepEqual(listing(base), ["inst"]);
});

for (
  const [what, links] of [
    ["an absolute target", [{ name: "out", target: "/etc" }]],
    ["a ../ target", [{ name: "bin/out", target: "../../../etc" }]],
    ["a chain that leads out where each link looked in", [
      { name: "here", target: "." },
      { name: "out", target: "here/.." },
    ]],
  ] as const
) {
  Deno.test(`a .tar.gz with a symlink out (${what}) is refused`, async () => {
    const bytes = await tarGz([
      AGENT,
      ...links.map((link) => ({ ...link, kind: "symlink" as const })),
    ]);
    const { error } = await unpack("tar.gz", bytes);
    assertRefused(
      error,
      /link .* leads (outside its directory|through another link)/,
    );
  });
}

Deno.test("a link that would carry a later file outside is refused before any file goes through it", async () => {
  // The classic: a link to "..", then a file "link/escaped".
  const bytes = await tarGz([
    AGENT,
    { name: "up", kind: "symlink", target: ".." },
    { name: "up/escaped", content: "x" },
  ]);
  const { base, error } = await unpack("tar.gz", bytes);
  assertRefused(error, /outside/);
  assert.ok(!listing(base).includes("inst/escaped"));
  assert.ok(!listing(base).includes("escaped"));
});

Deno.test("links that climb through an earlier link make nothing outside the install (a link's own directories never go through a link)", async () => {
  // Each target looks inside as text, but "t" climbs through "u" (a link to
  // ".."), and the last entry's directories would be made through "t".
  const bytes = await tarGz([
    AGENT,
    { name: "a/b/c/d/u", kind: "symlink", target: ".." },
    { name: "a/b/c/d/t", kind: "symlink", target: "u/../../../../.." },
    { name: "a/b/c/d/t/planted/evil", kind: "symlink", target: "x" },
  ]);
  const { base, error } = await unpack("tar.gz", bytes);
  assertRefused(error, /link/);
  assert.deepEqual(
    listing(base).filter((path) => path.includes("planted")),
    [],
    "nothing was made outside the unpack root",
  );
});

Deno.test("device files and FIFOs in a tar are refused", async () => {
  for (const kind of ["chardev", "fifo"] as const) {
    const { error } = await unpack(
      "tar.gz",
      await tarGz([AGENT, { name: "dev", kind }]),
    );
    assertRefused(error, /device|FIFO/);
  }
});

Deno.test("a tar entry claiming more than the size limit is refused before it is read", async () => {
  const bytes = await tarGz([
    AGENT,
    { name: "big", content: "tiny", claimedSize: 8 * 1024 * 1024 * 1024 },
  ]);
  const { error } = await unpack("tar.gz", bytes);
  assertRefused(error, /size limit/);
});

Deno.test("a gzip bomb (small archive, large content) stops at the limit", async () => {
  const bytes = await tarGz([AGENT, {
    name: "zeros",
    content: new Uint8Array(4 * 1024 * 1024),
  }]);
  assert.ok(bytes.length < 64 * 1024, "the archive itself is under the limit");
  const { error } = await unpack("tar.gz", bytes);
  assertRefused(error, /size limit/);
});

Deno.test("damaged gzip and non-tar content are refused", async () => {
  const good = await tarGz([AGENT]);
  const damaged = good.slice(0, good.length - 20);
  assertRefused((await unpack("tar.gz", damaged)).error, /damaged|ends/);
  const notTar = await gzip(new TextEncoder().encode("x".repeat(2048)));
  assertRefused((await unpack("tar.gz", notTar)).error, /not tar|checksum/);
});

Deno.test("an archive without the registry's program is refused", async () => {
  const { error } = await unpack(
    "tar.gz",
    await tarGz([{ name: "other", content: "x" }]),
  );
  assertRefused(error, /no program at bin\/agent/);
});

Deno.test("a well-formed .zip unpacks with its modes and an inside link", async () => {
  const bytes = await zipOf([
    { name: "bin/", kind: "dir" },
    AGENT,
    { name: "bin/alias", kind: "symlink", target: "agent" },
  ]);
  const { into, unpacked, error } = await unpack("zip", bytes);
  assert.equal(error, undefined);
  assert.equal(Deno.statSync(unpacked!.program).mode! & 0o111, 0o111);
  assert.equal(
    Deno.readTextFileSync(join(into, "bin/alias")),
    "#!/bin/sh\necho hi\n",
  );
});

Deno.test("a .zip with ../, an absolute name, a link out or a device file is refused", async () => {
  const cases: [TestMember, RegExp][] = [
    [{ name: "../escaped", content: "x" }, /\(\.\.\)/],
    [{ name: "/abs", content: "x" }, /absolute path/],
    [{ name: "out", kind: "symlink", target: "/etc/passwd" }, /outside/],
    [{ name: "out", kind: "symlink", target: "../../x" }, /outside/],
    [{ name: "dev", kind: "chardev" }, /device/],
  ];
  for (const [member, mentions] of cases) {
    const { base, error } = await unpack("zip", await zipOf([AGENT, member]));
    assertRefused(error, mentions);
    assert.ok(!listing(base).some((name) => name.endsWith("escaped")));
  }
});

Deno.test("a zip bomb and a zip whose sizes lie are refused", async () => {
  const bomb = await zipOf([AGENT, {
    name: "zeros",
    content: new Uint8Array(4 * 1024 * 1024),
  }]);
  assert.ok(bomb.length < 64 * 1024);
  assertRefused((await unpack("zip", bomb)).error, /size limit/);
  const liar = await zipOf([AGENT, {
    name: "zeros",
    content: new Uint8Array(32 * 1024),
    claimedSize: 100,
  }]);
  assertRefused((await unpack("zip", liar)).error, /larger than it says/);
});

Deno.test("a zip whose member fails its CRC is refused", async () => {
  const bytes = await zipOf([AGENT]);
  // Flip a byte of the deflated data (after the 30-byte header and the name).
  const damaged = bytes.slice();
  damaged[30 + "bin/agent".length + 2] ^= 0xff;
  assertRefused(
    (await unpack("zip", damaged)).error,
    /CRC|damaged|not the size/,
  );
});

Deno.test("a raw binary is written as the program with its run bit; one past the limit is refused", async () => {
  const script = new TextEncoder().encode("#!/bin/sh\necho hi\n");
  const { unpacked, error } = await unpack("raw", script, "./agent");
  assert.equal(error, undefined);
  assert.equal(Deno.statSync(unpacked!.program).mode! & 0o111, 0o111);
  const big = await unpack("raw", new Uint8Array(128 * 1024), "agent");
  assertRefused(big.error, /size limit/);
});

Deno.test("a .tar.bz2 unpacks through the system's bzip2, and a bzip2 bomb stops at the limit", async () => {
  const bzip2 = async (bytes: Uint8Array) => {
    const child = new Deno.Command("bzip2", {
      args: ["-c"],
      stdin: "piped",
      stdout: "piped",
    }).spawn();
    const writer = child.stdin.getWriter();
    await writer.write(bytes);
    await writer.close();
    return (await child.output()).stdout;
  };
  const good = await unpack("tar.bz2", await bzip2(tarOf([AGENT])));
  assert.equal(good.error, undefined);
  assert.equal(Deno.statSync(good.unpacked!.program).mode! & 0o111, 0o111);
  const bomb = await bzip2(tarOf([AGENT, {
    name: "zeros",
    content: new Uint8Array(4 * 1024 * 1024),
  }]));
  assert.ok(bomb.length < 64 * 1024);
  assertRefused((await unpack("tar.bz2", bomb)).error, /size limit/);
  const hostile = await bzip2(tarOf([AGENT, { name: "../x", content: "x" }]));
  assertRefused((await unpack("tar.bz2", hostile)).error, /\(\.\.\)/);
});
