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
import { deltaText, sseEvents, terminals } from "../serve_test_helpers.ts";
import { fixtureAgentArchive } from "../agent/registry_archives.ts";
import {
  listFixtureAgent,
  listHeldFixtureAgent,
  platformKey,
  serveRegistry,
  type TestRegistry,
} from "../agent/registry_server.ts";

/**
 * A hub using `hubRegistry` with daemon `daemonId` using `daemonRegistry`
 * and its own data dir; `run` posts a run of `provider` to that daemon.
 */
async function registryFleet(options: {
  daemonId: string;
  provider: string;
  hubRegistry: TestRegistry;
  daemonRegistry: TestRegistry;
}) {
  const daemonData = tempDir();
  const { serve, daemon } = await serveWithDaemon(options.daemonId, {
    serveEnv: { RUNNER_REGISTRY_URL: options.hubRegistry.registryUrl },
    daemonArgs: [
      "--data-dir",
      daemonData,
      "--registry-url",
      options.daemonRegistry.registryUrl,
    ],
  });
  const run = () =>
    postDaemonRun(serve.url, {
      daemonId: options.daemonId,
      text: "hi",
      provider: options.provider,
      config: { workspace: tempDir() },
    });
  const stop = async () => {
    await daemon.stop();
    await serve.stop();
  };
  return { daemon, daemonData, run, stop };
}

Deno.test("a daemon installs a hub's registry agent for its own platform, its download reaching the hub's caller as agent.installing events first; the next run installs nothing", async () => {
  const registry = serveRegistry();
  // Half-way, the download waits for the hub's caller to see progress.
  const { archive, release: seen } = await listHeldFixtureAgent(registry, {
    id: "daemon-agent",
    file: "fixture.tar.gz",
    args: ["--text", "installed on the daemon"],
    padding: 2 * 1024 * 1024,
  });
  const { daemon, daemonData, run, stop } = await registryFleet({
    daemonId: "registry-laptop",
    provider: "daemon-agent",
    hubRegistry: registry,
    daemonRegistry: registry,
  });
  try {
    await daemon.connected;
    const response = await run();
    assert.equal(response.status, 200);
    const events = await sseEvents(response, (event) => {
      if (event.type === "agent.installing") seen();
    });
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
    seen();
    await stop();
    await registry.close();
  }
});

Deno.test("the hub pins the version its registry lists: a daemon whose registry lists another runs the pinned one when installed, else refuses, never its own latest", async () => {
  const hubRegistry = serveRegistry();
  const daemonRegistry = serveRegistry();
  listFixtureAgent(hubRegistry, {
    id: "pinned-agent",
    file: "one.tar.gz",
    archive: await fixtureAgentArchive(),
    args: ["--text", "version one"],
    version: "1.0.0",
  });
  listFixtureAgent(daemonRegistry, {
    id: "pinned-agent",
    file: "two.tar.gz",
    archive: await fixtureAgentArchive(),
    args: ["--text", "version two"],
    version: "2.0.0",
  });
  const fleet = await registryFleet({
    daemonId: "pinned-laptop",
    provider: "pinned-agent",
    hubRegistry,
    daemonRegistry,
  });
  const { daemonData } = fleet;
  const run = async (): Promise<RunEvent[]> =>
    await sseEvents(await fleet.run());
  try {
    await fleet.daemon.connected;
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
    await fleet.stop();
    await hubRegistry.close();
    await daemonRegistry.close();
  }
});
