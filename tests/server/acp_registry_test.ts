/**
 * `/acp` whose target is a registry agent: `initialize` installs the agent
 * (or uses the installed one) and answers with its real capabilities.
 *
 * @module
 */

import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { initialize, openAcpClient } from "../acp_client_helpers.ts";
import { startServe, tempDir } from "../serve_test_helpers.ts";
import { fixtureAgentScript, gzip, tarOf } from "../agent/registry_archives.ts";
import { binaryEntry, serveRegistry } from "../agent/registry_server.ts";

Deno.test("acp: initialize of a registry target installs the agent once and answers with its own capabilities", async () => {
  const registry = serveRegistry();
  const { url } = registry.addFile(
    "fixture.tar.gz",
    await gzip(tarOf([{
      name: "bin/run-agent",
      content: fixtureAgentScript(),
      mode: 0o755,
    }])),
  );
  registry.setAgents([binaryEntry("acp-agent", {
    archive: url,
    cmd: "bin/run-agent",
    args: ["--image"],
  })]);
  const dataDir = await tempDir();
  const serve = await startServe({
    dataDir,
    args: [
      "--allow-custom-commands",
      "--provider",
      "acp-agent",
      "--workspace",
      await Deno.makeTempDir({ dir: dataDir, prefix: "ws-" }),
    ],
    env: { RUNNER_REGISTRY_URL: registry.registryUrl },
  });
  try {
    for (const profile of ["http", "websocket"] as const) {
      const editor = openAcpClient({
        url: serve.url,
        token: serve.token,
        profile,
      });
      try {
        const init = await initialize(editor);
        const meta = init._meta?.runner as Record<string, unknown>;
        assert.equal(meta.capabilities_from, "probe", JSON.stringify(meta));
        assert.equal(meta.provider, "acp-agent");
        assert.deepEqual(meta.agent_info, {
          name: "fixture-agent",
          version: "1.0.0",
        });
        assert.equal(init.agentCapabilities?.promptCapabilities?.image, true);
      } finally {
        editor.close();
      }
    }
    assert.ok(
      existsSync(join(dataDir, "agents/acp-agent/1.0.0/receipt.json")),
    );
    assert.equal(registry.hits.get("/files/fixture.tar.gz"), 1);
  } finally {
    await serve.stop("SIGTERM");
    await registry.close();
    await Deno.remove(dataDir, { recursive: true }).catch(() => {});
  }
});
