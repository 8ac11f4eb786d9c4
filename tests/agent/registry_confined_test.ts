/**
 * A confined run of a registry agent: the installed agent is bound into the
 * sandbox read-only, so the agent starts there and cannot change itself.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { runCli, tempDir } from "../helpers.ts";
import { confinedFlags, sandboxWorld } from "../sandbox_helpers.ts";
import { fixtureAgentArchive } from "./registry_archives.ts";
import { listFixtureAgent, serveRegistry } from "./registry_server.ts";

Deno.test("a confined run installs a registry agent, which runs in the sandbox and cannot write to its own install", async () => {
  const registry = serveRegistry();
  try {
    const dataDir = tempDir();
    const files = join(dataDir, "agents/confined-agent/1.0.0/files");
    listFixtureAgent(registry, {
      id: "confined-agent",
      file: "fixture.tar.gz",
      archive: await fixtureAgentArchive({ confined: true }),
      args: ["--attack-escape", JSON.stringify({ readOnlyDir: files })],
    });
    const world = sandboxWorld();
    const result = await runCli([
      "run",
      "confined-agent",
      "--workspace",
      tempDir("sandbox-ws-"),
      ...confinedFlags(),
      "hi",
    ], {
      env: {
        ...world.environment,
        RUNNER_DATA_DIR: dataDir,
        RUNNER_REGISTRY_URL: registry.registryUrl,
      },
    });
    assert.equal(result.code, 0, result.stderr);
    assert.match(
      result.stdout,
      /attack-write-read-only: error (EROFS|EACCES|EPERM)/,
    );
    assert.throws(() => Deno.statSync(join(files, "escaped.txt")));
  } finally {
    await registry.close();
  }
});
