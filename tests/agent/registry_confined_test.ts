/**
 * A confined run of a registry agent: the installed agent is bound into the
 * sandbox read-only, so the agent starts there and cannot change itself.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { ROOT, runCli, tempDir } from "../helpers.ts";
import { DENO_DIR, sandboxWorld } from "../sandbox_helpers.ts";
import { fixtureAgentScript, gzip, tarOf } from "./registry_archives.ts";
import { binaryEntry, serveRegistry } from "./registry_server.ts";

Deno.test("a confined run installs a registry agent, which runs in the sandbox and cannot write to its own install", async () => {
  const registry = serveRegistry();
  try {
    const dataDir = tempDir();
    const files = join(dataDir, "agents/confined-agent/1.0.0/files");
    const { url } = registry.addFile(
      "fixture.tar.gz",
      await gzip(tarOf([{
        name: "bin/run-agent",
        content: fixtureAgentScript({ confined: true }),
        mode: 0o755,
      }])),
    );
    registry.setAgents([binaryEntry("confined-agent", {
      archive: url,
      cmd: "bin/run-agent",
      args: ["--attack-escape", JSON.stringify({ readOnlyDir: files })],
    })]);
    const world = sandboxWorld();
    const result = await runCli([
      "run",
      "confined-agent",
      "--workspace",
      tempDir("sandbox-ws-"),
      "--sandbox",
      "confined",
      "--sandbox-read-paths",
      `${ROOT},${DENO_DIR}`,
      "--env-json",
      JSON.stringify({ DENO_DIR }),
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
