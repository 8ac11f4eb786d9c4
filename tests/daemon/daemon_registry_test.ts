/**
 * A hub's run of a registry agent on a daemon: the hub names the agent and
 * pins the version its own registry lists (no command, no path); the daemon
 * installs exactly that version for its own platform from its own registry
 * (reporting the download as `agent.installing` events), or refuses.
 */

import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import type { RunEvent } from "../../lib/events.ts";
import { postDaemonRun, serveWithDaemon } from "../daemon_test_helpers.ts";
import { runCli, tempDir } from "../helpers.ts";
import {
  deltaText,
  readSse,
  sseEvents,
  terminals,
} from "../serve_test_helpers.ts";
import { fixtureAgentScript, gzip, tarOf } from "../agent/registry_archives.ts";
import {
  binaryEntry,
  platformKey,
  serveRegistry,
} from "../agent/registry_server.ts";

async function agentArchive(padding = 0): Promise<Uint8Array> {
  const noise = new Uint8Array(padding);
  for (let at = 0; at < padding; at += 65536) {
    crypto.getRandomValues(noise.subarray(at, Math.min(at + 65536, padding)));
  }
  return await gzip(tarOf([
    { name: "bin/run-agent", content: fixtureAgentScript(), mode: 0o755 },
    ...(padding ? [{ name: "share/blob", content: noise }] : []),
  ]));
}

Deno.test("a daemon installs a hub's registry agent for its own platform, its download reaching the hub's caller as agent.installing events first; the next run installs nothing", async () => {
  const registry = serveRegistry();
  const archive = await agentArchive(2 * 1024 * 1024);
  // Half-way, the download waits for the hub's caller to see progress.
  const seen = Promise.withResolvers<void>();
  const { url } = registry.addFile("fixture.tar.gz", archive, {
    after: 1024 * 1024 + 4096,
    until: seen.promise,
  });
  registry.setAgents([binaryEntry("daemon-agent", {
    archive: url,
    cmd: "bin/run-agent",
    args: ["--text", "installed on the daemon"],
  })]);
  const daemonData = tempDir();
  const { serve, daemon } = await serveWithDaemon("registry-laptop", {
    serveEnv: { RUNNER_REGISTRY_URL: registry.registryUrl },
    daemonArgs: [
      "--data-dir",
      daemonData,
      "--registry-url",
      registry.registryUrl,
    ],
  });
  try {
    await daemon.connected;
    const run = () =>
      postDaemonRun(serve.url, {
        daemonId: "registry-laptop",
        text: "hi",
        provider: "daemon-agent",
        config: { workspace: tempDir() },
      });
    const response = await run();
    assert.equal(response.status, 200);
    const events: RunEvent[] = [];
    for await (const message of readSse(response.body!)) {
      const event = JSON.parse(message.data) as RunEvent;
      events.push(event);
      if (event.type === "agent.installing") seen.resolve();
    }
    const [last] = terminals(events);
    assert.equal(last.type, "run.completed", JSON.stringify(last));
    assert.match(deltaText(events), /installed on the daemon/);
    const installing = events.filter((event) =>
      event.type === "agent.installing"
    );
    assert.ok(installing.length >= 2, JSON.stringify(events));
    assert.ok(
      events.slice(0, installing.length).every((event) =>
        event.type === "agent.installing"
      ),
      "the install events come before the agent's",
    );
    assert.deepEqual(installing.at(-1)?.data, {
      id: "daemon-agent",
      version: "1.0.0",
      received: archive.length,
      total: archive.length,
    });
    const receipt = JSON.parse(Deno.readTextFileSync(
      join(daemonData, "agents/daemon-agent/1.0.0/receipt.json"),
    ));
    assert.equal(receipt.platform, platformKey());

    const again = await sseEvents(await run());
    assert.equal(terminals(again)[0].type, "run.completed");
    assert.ok(!again.some((event) => event.type === "agent.installing"));
    assert.equal(registry.hits.get("/files/fixture.tar.gz"), 1);
  } finally {
    seen.resolve();
    await daemon.stop();
    await serve.stop();
    await registry.close();
  }
});

Deno.test("the hub pins the version its registry lists: a daemon whose registry lists another runs the pinned one when installed, else refuses, never its own latest", async () => {
  const hubRegistry = serveRegistry();
  const daemonRegistry = serveRegistry();
  const one = hubRegistry.addFile("one.tar.gz", await agentArchive());
  hubRegistry.setAgents([binaryEntry("pinned-agent", {
    archive: one.url,
    cmd: "bin/run-agent",
    args: ["--text", "version one"],
  }, "1.0.0")]);
  const two = daemonRegistry.addFile("two.tar.gz", await agentArchive());
  daemonRegistry.setAgents([binaryEntry("pinned-agent", {
    archive: two.url,
    cmd: "bin/run-agent",
    args: ["--text", "version two"],
  }, "2.0.0")]);
  const daemonData = tempDir();
  const { serve, daemon } = await serveWithDaemon("pinned-laptop", {
    serveEnv: { RUNNER_REGISTRY_URL: hubRegistry.registryUrl },
    daemonArgs: [
      "--data-dir",
      daemonData,
      "--registry-url",
      daemonRegistry.registryUrl,
    ],
  });
  const run = async () =>
    await sseEvents(
      await postDaemonRun(serve.url, {
        daemonId: "pinned-laptop",
        text: "hi",
        provider: "pinned-agent",
        config: { workspace: tempDir() },
      }),
    );
  try {
    await daemon.connected;
    const refused = terminals(await run())[0];
    assert.equal(refused.type, "run.failed");
    assert.equal(refused.data.code, "agent.version_unavailable");
    assert.match(String(refused.data.error), /pinned-agent 1\.0\.0/);
    assert.ok(!existsSync(join(daemonData, "agents/pinned-agent/2.0.0")));
    assert.equal(daemonRegistry.hits.get("/files/two.tar.gz"), undefined);

    // The pinned version installed on the daemon (from the hub's registry) runs.
    const install = await runCli(["agents", "install", "pinned-agent"], {
      env: {
        RUNNER_DATA_DIR: daemonData,
        RUNNER_REGISTRY_URL: hubRegistry.registryUrl,
      },
    });
    assert.equal(install.code, 0, install.stderr);
    const events = await run();
    assert.equal(terminals(events)[0].type, "run.completed");
    assert.match(deltaText(events), /version one/);
    assert.ok(!existsSync(join(daemonData, "agents/pinned-agent/2.0.0")));
    assert.equal(daemonRegistry.hits.get("/files/two.tar.gz"), undefined);
  } finally {
    await daemon.stop();
    await serve.stop();
    await hubRegistry.close();
    await daemonRegistry.close();
  }
});
