/**
 * A hub's run of a registry agent on a daemon: the hub names the agent (no
 * command, no path), and the daemon installs it for its own platform from
 * its own registry, then runs it.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { postDaemonRun, serveWithDaemon } from "../daemon_test_helpers.ts";
import { tempDir } from "../helpers.ts";
import { deltaText, sseEvents, terminals } from "../serve_test_helpers.ts";
import { fixtureAgentScript, gzip, tarOf } from "../agent/registry_archives.ts";
import {
  binaryEntry,
  platformKey,
  serveRegistry,
} from "../agent/registry_server.ts";

Deno.test("a daemon installs a hub's registry agent for its own platform and runs it", async () => {
  const registry = serveRegistry();
  const { url } = registry.addFile(
    "fixture.tar.gz",
    await gzip(tarOf([{
      name: "bin/run-agent",
      content: fixtureAgentScript(),
      mode: 0o755,
    }])),
  );
  registry.setAgents([binaryEntry("daemon-agent", {
    archive: url,
    cmd: "bin/run-agent",
    args: ["--text", "installed on the daemon"],
  })]);
  const daemonData = tempDir();
  const { serve, daemon } = await serveWithDaemon("registry-laptop", {
    daemonArgs: [
      "--data-dir",
      daemonData,
      "--registry-url",
      registry.registryUrl,
    ],
  });
  try {
    await daemon.connected;
    const response = await postDaemonRun(serve.url, {
      daemonId: "registry-laptop",
      text: "hi",
      provider: "daemon-agent",
      config: {
        workspace: tempDir(),
      },
    });
    assert.equal(response.status, 200);
    const events = await sseEvents(response);
    const [last] = terminals(events);
    assert.equal(last.type, "run.completed", JSON.stringify(last));
    assert.match(deltaText(events), /installed on the daemon/);
    const receipt = JSON.parse(Deno.readTextFileSync(
      join(daemonData, "agents/daemon-agent/1.0.0/receipt.json"),
    ));
    assert.equal(receipt.platform, platformKey());
    assert.equal(registry.hits.get("/files/fixture.tar.gz"), 1);
  } finally {
    await daemon.stop();
    await serve.stop();
    await registry.close();
  }
});
