/**
 * Registry agents end to end: a registry served on 127.0.0.1, the fixture
 * agent packaged as .tar.gz, .zip and a raw "binary" (a shell script that
 * execs it), installed on first use by real `runner` processes; hostile and
 * tampered archives refused with nothing left behind; the cache offline.
 */

import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { parseJsonLines, runCli, tempDir } from "../helpers.ts";
import type { RunEvent } from "../../lib/events.ts";
import {
  fixtureAgentScript,
  gzip,
  tarOf,
  zipOf,
} from "../agent/registry_archives.ts";
import {
  binaryEntry,
  listFixtureAgent,
  platformKey,
  serveRegistry,
  type TestRegistry,
} from "../agent/registry_server.ts";

const SCRIPT = { content: fixtureAgentScript(), mode: 0o755 };

async function fixtureTarGz(): Promise<Uint8Array> {
  return await gzip(tarOf([
    { name: "agent/", kind: "dir" },
    { name: "agent/bin/run-agent", ...SCRIPT },
  ]));
}

/** Lists {@linkcode fixtureTarGz} as the registry's only agent, `id`, run with `args`. */
async function listTarAgent(
  registry: TestRegistry,
  id: string,
  args?: string[],
): Promise<{ url: string; sha256: string }> {
  return listFixtureAgent(registry, {
    id,
    file: "fixture.tar.gz",
    archive: await fixtureTarGz(),
    cmd: "./agent/bin/run-agent",
    args,
  });
}

/** Runs `runner` with the registry and a data dir of the test's. */
function runner(
  registry: TestRegistry,
  dataDir: string,
  args: string[],
) {
  return runCli(args, {
    env: {
      RUNNER_DATA_DIR: dataDir,
      RUNNER_REGISTRY_URL: registry.registryUrl,
    },
  });
}

/** What `<data dir>/agents/<id>` holds (the lock and the seen-archives record aside). */
function installsOf(dataDir: string, id: string): string[] {
  const dir = join(dataDir, "agents", id);
  if (!existsSync(dir)) return [];
  return [...Deno.readDirSync(dir)].map((entry) => entry.name)
    .filter((name) => name !== ".lock" && name !== ".seen.json").sort();
}

async function withRegistry(
  body: (registry: TestRegistry) => Promise<void>,
): Promise<void> {
  const registry = serveRegistry();
  try {
    await body(registry);
  } finally {
    await registry.close();
  }
}

Deno.test("runner run <registry id> installs a .tar.gz agent on first use, with a receipt, and runs it; the second run downloads nothing", async () => {
  await withRegistry(async (registry) => {
    const { url, sha256 } = await listTarAgent(registry, "fixture-agent", [
      "--text",
      "hello from the registry",
    ]);
    const dataDir = tempDir();
    for (const attempt of [1, 2]) {
      const result = await runner(registry, dataDir, [
        "run",
        "fixture-agent",
        "--workspace",
        tempDir(),
        "hi",
      ]);
      assert.equal(result.code, 0, `${attempt}: ${result.stderr}`);
      assert.match(result.stdout, /hello from the registry/);
    }
    assert.equal(registry.hits.get("/files/fixture.tar.gz"), 1);
    const receipt = JSON.parse(Deno.readTextFileSync(
      join(dataDir, "agents/fixture-agent/1.0.0/receipt.json"),
    ));
    assert.equal(receipt.sha256, sha256);
    assert.equal(receipt.archive, url);
    assert.equal(receipt.platform, platformKey());
    const listed = await runner(registry, dataDir, [
      "agents",
      "list",
      "--json",
    ]);
    assert.deepEqual(
      JSON.parse(listed.stdout).map((entry: { id: string; sha256: string }) => [
        entry.id,
        entry.sha256,
      ]),
      [["fixture-agent", sha256]],
    );
  });
});

Deno.test("runner probe <registry id> installs a .zip agent and probes it", async () => {
  await withRegistry(async (registry) => {
    listFixtureAgent(registry, {
      id: "zip-agent",
      file: "fixture.zip",
      archive: await zipOf([{ name: "bin/run-agent", ...SCRIPT }]),
    });
    const dataDir = tempDir();
    const result = await runner(registry, dataDir, [
      "probe",
      "zip-agent",
      "--workspace",
      tempDir(),
      "--json",
    ]);
    assert.equal(result.code, 0, result.stderr + result.stdout);
    const report = JSON.parse(result.stdout);
    assert.equal(report.outcome, "ok");
    assert.equal(report.command_source, "registry");
    assert.ok(existsSync(join(dataDir, "agents/zip-agent/1.0.0/receipt.json")));
  });
});

Deno.test("a raw binary is installed by runner agents install (checked against --sha256) and runs; runner agents remove takes it away", async () => {
  await withRegistry(async (registry) => {
    const script = new TextEncoder().encode(fixtureAgentScript());
    const { sha256 } = listFixtureAgent(registry, {
      id: "raw-agent",
      file: "run-agent",
      archive: script,
      cmd: "run-agent",
      args: ["--text", "raw agent here"],
    });
    const dataDir = tempDir();
    const installed = await runner(registry, dataDir, [
      "agents",
      "install",
      "raw-agent",
      "--sha256",
      sha256,
    ]);
    assert.equal(installed.code, 0, installed.stderr);
    assert.match(installed.stdout, /installed: raw-agent 1\.0\.0/);
    const run = await runner(registry, dataDir, [
      "run",
      "raw-agent",
      "--workspace",
      tempDir(),
      "hi",
    ]);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /raw agent here/);
    const removed = await runner(registry, dataDir, [
      "agents",
      "remove",
      "raw-agent",
    ]);
    assert.match(removed.stdout, /removed: raw-agent 1\.0\.0/);
    assert.deepEqual(installsOf(dataDir, "raw-agent"), []);
  });
});

Deno.test("a wrong sha256 (the operator's or a mirror's) is refused, not retryable, and leaves nothing behind", async () => {
  await withRegistry(async (registry) => {
    const { url } = registry.addFile("fixture.tar.gz", await fixtureTarGz());
    const wrong = "0".repeat(64);
    registry.setAgents([
      binaryEntry("mirror-agent", {
        archive: url,
        cmd: "./agent/bin/run-agent",
        sha256: wrong,
      }),
      binaryEntry("plain-agent", {
        archive: url,
        cmd: "./agent/bin/run-agent",
      }),
    ]);
    const dataDir = tempDir();
    const run = await runner(registry, dataDir, [
      "run",
      "mirror-agent",
      "--workspace",
      tempDir(),
      "--json",
      "hi",
    ]);
    assert.notEqual(run.code, 0);
    // The run existed while it downloaded: its failure is its terminal event.
    const failed = parseJsonLines(run.stdout).at(-1) as unknown as RunEvent;
    assert.equal(failed.type, "run.failed");
    assert.equal(failed.data.code, "agent.checksum_mismatch");
    assert.equal(failed.data.retryable, false);
    assert.match(
      String(failed.data.error),
      new RegExp(`not the expected ${wrong}`),
    );
    assert.deepEqual(installsOf(dataDir, "mirror-agent"), []);
    const install = await runner(registry, dataDir, [
      "agents",
      "install",
      "plain-agent",
      "--sha256",
      "f".repeat(64),
    ]);
    assert.notEqual(install.code, 0);
    assert.match(install.stderr, /agent\.checksum_mismatch/);
    assert.deepEqual(installsOf(dataDir, "plain-agent"), []);
  });
});

Deno.test("a different archive under an id and version installed before is refused", async () => {
  await withRegistry(async (registry) => {
    const first = await listTarAgent(registry, "moving-agent");
    const dataDir = tempDir();
    const install = ["agents", "install", "moving-agent"];
    assert.equal((await runner(registry, dataDir, install)).code, 0);
    await runner(registry, dataDir, ["agents", "remove", "moving-agent"]);
    // Same id, same version, other bytes.
    registry.addFile(
      "fixture.tar.gz",
      await gzip(
        tarOf([{ name: "agent/bin/run-agent", content: "#!/bin/sh\n" }]),
      ),
    );
    const again = await runner(registry, dataDir, install);
    assert.notEqual(again.code, 0);
    assert.match(again.stderr, /agent\.checksum_mismatch/);
    assert.match(
      again.stderr,
      new RegExp(`not the ${first.sha256} installed before`),
    );
    assert.deepEqual(installsOf(dataDir, "moving-agent"), []);
  });
});

Deno.test("hostile archives from the registry are refused and leave nothing behind: ../ entries, a symlink out, an oversized one", async () => {
  await withRegistry(async (registry) => {
    const hostile: [string, string, Uint8Array, RegExp][] = [
      [
        "dotdot-agent",
        "dotdot.tar.gz",
        await gzip(tarOf([
          { name: "agent/bin/run-agent", ...SCRIPT },
          { name: "../../../escaped", content: "pwned" },
        ])),
        /leads outside its directory \(\.\.\)/,
      ],
      [
        "link-agent",
        "link.zip",
        await zipOf([
          { name: "bin/run-agent", ...SCRIPT },
          { name: "bin/out", kind: "symlink", target: "/etc" },
        ]),
        /link "bin\/out" leads outside/,
      ],
      [
        "huge-agent",
        "huge.tar.gz",
        await gzip(tarOf([
          { name: "agent/bin/run-agent", ...SCRIPT },
          { name: "blob", content: "x", claimedSize: 4 * 1024 ** 3 },
        ])),
        /size limit/,
      ],
    ];
    registry.setAgents(hostile.map(([id, file, bytes]) =>
      binaryEntry(id, {
        archive: registry.addFile(file, bytes).url,
        cmd: id === "link-agent" ? "bin/run-agent" : "agent/bin/run-agent",
      })
    ));
    const dataDir = join(tempDir(), "a", "b", "c");
    for (const [id, , , reason] of hostile) {
      const result = await runner(registry, dataDir, ["agents", "install", id]);
      assert.notEqual(result.code, 0, id);
      assert.match(result.stderr, /agent\.archive_refused/, id);
      assert.match(result.stderr, reason, id);
      assert.deepEqual(installsOf(dataDir, id), [], id);
    }
    for (let dir = dataDir, up = 0; up < 4; up++, dir = join(dir, "..")) {
      assert.ok(!existsSync(join(dir, "escaped")), `escaped in ${dir}`);
    }
  });
});

Deno.test("a malformed registry entry is skipped with its reason; the others stay usable; its id is unknown with the reason", async () => {
  await withRegistry(async (registry) => {
    const { url } = registry.addFile("fixture.tar.gz", await fixtureTarGz());
    registry.setAgents([
      { id: "Bad Id!", version: "1", distribution: {} },
      {
        id: "broken-agent",
        version: "1.0.0",
        distribution: {
          binary: { [platformKey()]: { archive: "not a url", cmd: "x" } },
        },
      },
      binaryEntry("good-agent", { archive: url, cmd: "./agent/bin/run-agent" }),
    ]);
    const dataDir = tempDir();
    const listed = await runner(registry, dataDir, [
      "providers",
      "--registry",
      "--json",
    ]);
    assert.equal(listed.code, 0, listed.stderr);
    const json = JSON.parse(listed.stdout);
    assert.deepEqual(
      json.agents.map((agent: { id: string; here: string }) => [
        agent.id,
        agent.here,
      ]),
      [["good-agent", "binary"]],
    );
    assert.deepEqual(
      json.skipped.map((entry: { index: number }) => entry.index),
      [0, 1],
    );
    assert.match(json.skipped[1].reason, /archive must be an http/);
    const good = await runner(registry, tempDir(), [
      "run",
      "good-agent",
      "--workspace",
      tempDir(),
      "hi",
    ]);
    assert.equal(good.code, 0, good.stderr);
    assert.match(
      good.stderr,
      /note: registry: skipped 2 malformed entries of .*: Bad Id! \(id must be.*broken-agent \(binary\./,
    );
    const run = await runner(registry, dataDir, [
      "run",
      "broken-agent",
      "--workspace",
      tempDir(),
      "hi",
    ]);
    assert.notEqual(run.code, 0);
    assert.match(run.stderr, /provider\.unknown/);
    assert.match(run.stderr, /malformed: binary\..*archive must be/);
    const meant = await runner(registry, dataDir, [
      "run",
      "good-agnt",
      "--workspace",
      tempDir(),
      "hi",
    ]);
    assert.match(meant.stderr, /did you mean good-agent\?/);
  });
});

Deno.test("concurrent first runs of one agent install it once and both run", async () => {
  await withRegistry(async (registry) => {
    await listTarAgent(registry, "shared-agent", ["--text", "shared"]);
    const dataDir = tempDir();
    const runs = await Promise.all(
      [1, 2, 3].map(() =>
        runner(registry, dataDir, [
          "run",
          "shared-agent",
          "--workspace",
          tempDir(),
          "hi",
        ])
      ),
    );
    for (const result of runs) {
      assert.equal(result.code, 0, result.stderr);
      assert.match(result.stdout, /shared/);
    }
    assert.equal(registry.hits.get("/files/fixture.tar.gz"), 1);
    assert.deepEqual(installsOf(dataDir, "shared-agent"), ["1.0.0"]);
  });
});

Deno.test("offline, the cached registry serves and says how old it is; with no cache the registry is unreachable", async () => {
  const registry = serveRegistry();
  await listTarAgent(registry, "cached-agent", ["--text", "still here"]);
  const dataDir = tempDir();
  const first = await runner(registry, dataDir, [
    "run",
    "cached-agent",
    "--workspace",
    tempDir(),
    "hi",
  ]);
  assert.equal(first.code, 0, first.stderr);
  await registry.close();
  const listed = await runner(registry, dataDir, [
    "providers",
    "--registry",
    "--refresh",
  ]);
  assert.equal(listed.code, 0, listed.stderr);
  assert.match(
    listed.stdout,
    /could not be read \(.*\); using the cached copy fetched \d+ s ago/,
  );
  assert.match(listed.stdout, /cached-agent\s+1\.0\.0\s+binary\s+1\.0\.0/);
  const run = await runner(registry, dataDir, [
    "run",
    "cached-agent",
    "--registry-refresh",
    "0.001",
    "--workspace",
    tempDir(),
    "hi",
  ]);
  assert.equal(run.code, 0, run.stderr);
  assert.match(run.stdout, /still here/);
  assert.match(run.stderr, /note: registry: .* using the cached copy fetched/);
  const fresh = await runner(registry, tempDir(), [
    "run",
    "cached-agent",
    "--workspace",
    tempDir(),
    "hi",
  ]);
  assert.notEqual(fresh.code, 0);
  assert.match(fresh.stderr, /registry\.unreachable/);
  assert.match(fresh.stderr, /no copy is cached/);
});
