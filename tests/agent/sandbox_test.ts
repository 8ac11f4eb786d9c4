/**
 * `sandbox=confined` with the real fixture agent under a real bubblewrap: the
 * agent, by its own file and socket calls (not `fs/*`), reaches its
 * workspace and its state directory and nothing else of the machine; `off`
 * changes nothing. These tests need bwrap and fail (never skip) without it.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { existsSync } from "node:fs";
import { prepareAgentCommand } from "../../lib/providers.ts";
import { spawnAgent } from "../../lib/agent/process.ts";
import {
  createReaperRegistry,
  reapLeftoverGroups,
} from "../../lib/agent/reaper.ts";
import { STORE_FILE_NAME } from "../../lib/store/open.ts";
import { sampleAssets } from "../assets_test_helpers.ts";
import { EventLog, harness, runCompleted } from "../engine_helpers.ts";
import { tempDir } from "../helpers.ts";
import {
  DENO_DIR,
  markedProcesses,
  pidNamespace,
  reachLines,
  sandboxConfig,
  sandboxWorld,
} from "../sandbox_helpers.ts";

/** A loopback listener the agent was not given, accepting and closing. */
function loopbackListener(): { port: number; close(): void } {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  (async () => {
    for await (const conn of listener) conn.close();
  })().catch(() => {});
  return {
    port: (listener.addr as Deno.NetAddr).port,
    close: () => listener.close(),
  };
}

/** Files of the machine the agent must not see when confined. */
function outsideFiles(dataDir: string, homeSecret: string) {
  const other = tempDir("other-ws-");
  const otherFile = join(other, "notes.txt");
  Deno.writeTextFileSync(otherFile, "another workspace\n");
  const tokens = join(dataDir, "tokens.txt");
  Deno.writeTextFileSync(tokens, "runner tokens\n");
  return {
    homeSecret,
    otherFile,
    tokens,
    store: join(dataDir, STORE_FILE_NAME),
  };
}

Deno.test("sandbox=confined: the agent writes its workspace and state dir, and cannot read $HOME, another workspace or the runner's data dir, nor dial loopback (network none)", async () => {
  const world = sandboxWorld();
  const h = harness({ environment: world.environment });
  const listener = loopbackListener();
  try {
    const outside = outsideFiles(h.dataDir, world.homeSecret);
    const workspaceFile = "written.txt";
    const stateFile = join(world.home, ".codex", "state.json");
    const config = sandboxConfig(world, [
      ...["--try-write", workspaceFile, "--try-write", stateFile],
      ...["--try-write", join(world.home, "dropped.txt")],
      ...Object.values(outside).flatMap((path) => ["--try-read", path]),
      ...["--try-read", "/etc/hostname", "--try-list-proc"],
      ...["--try-connect", String(listener.port)],
    ], {
      // A preset's name brings its state dirs (codex: ~/.codex).
      provider: "codex",
      "sandbox-network": "none",
      "langbot-assets-enabled": false,
      // $HOME on the agent's PATH must not bring $HOME into view.
      "env-json": {
        DENO_DIR,
        SANDBOX_TEST_MARK: world.marker,
        PATH: `${world.home}:${world.environment.PATH}`,
      },
    });
    const log = await runCompleted(h.manager, {
      input: { text: "hi" },
      config,
    });
    assert.deepEqual(log.ofType("run.started")[0].data, {
      agent: "cold",
      sandbox: "confined",
    });
    const lines = reachLines(log.messages()[0]);
    assert.equal(lines[`try-write ${workspaceFile}`], "ok");
    assert.equal(lines[`try-write ${stateFile}`], "ok");
    assert.equal(
      Deno.readTextFileSync(join(config.workspace!, workspaceFile)),
      "written by the fixture itself\n",
    );
    assert.equal(
      Deno.readTextFileSync(stateFile),
      "written by the fixture itself\n",
    );
    // The rest of $HOME is an empty scratch directory: writes there vanish.
    assert.equal(lines[`try-write ${join(world.home, "dropped.txt")}`], "ok");
    assert.throws(() => Deno.statSync(join(world.home, "dropped.txt")));
    for (const path of Object.values(outside)) {
      assert.equal(lines[`try-read ${path}`], "error NotFound", path);
    }
    assert.match(lines["try-read /etc/hostname"], /^ok /);
    assert.equal(
      lines[`try-connect ${listener.port}`],
      "error ConnectionRefused",
    );
    // Its own PID namespace: bwrap's init and the agent, nothing of the host.
    assert.equal(lines["try-list-proc"], "1,2");
  } finally {
    listener.close();
    await h.close();
  }
});

Deno.test("sandbox=off changes nothing: the same agent reads $HOME, another workspace and the data dir, dials loopback, and sees the host's processes", async () => {
  const world = sandboxWorld();
  const h = harness({ environment: world.environment });
  const listener = loopbackListener();
  try {
    const { homeSecret, otherFile, tokens } = outsideFiles(
      h.dataDir,
      world.homeSecret,
    );
    const config = sandboxConfig(world, [
      ...[homeSecret, otherFile, tokens].flatMap((p) => ["--try-read", p]),
      ...["--try-connect", String(listener.port), "--try-list-proc"],
    ], { sandbox: "off", "langbot-assets-enabled": false });
    const log = await runCompleted(h.manager, {
      input: { text: "hi" },
      config,
    });
    assert.equal(log.ofType("run.started")[0].data.sandbox, "off");
    const lines = reachLines(log.messages()[0]);
    assert.equal(lines[`try-read ${homeSecret}`], "ok home secret");
    assert.equal(lines[`try-read ${otherFile}`], "ok another workspace");
    assert.equal(lines[`try-read ${tokens}`], "ok runner tokens");
    assert.equal(lines[`try-connect ${listener.port}`], "ok");
    const pids = lines["try-list-proc"].split(",").map(Number);
    assert.ok(pids.includes(Deno.pid), "the host's processes are visible");
  } finally {
    listener.close();
    await h.close();
  }
});

Deno.test("sandbox=confined with sandbox-network=full: the run's assets endpoint and sandbox-read-paths (read-only) are reachable, the host's loopback is not", async () => {
  const world = sandboxWorld();
  const h = harness({ environment: world.environment });
  const listener = loopbackListener();
  try {
    const shared = tempDir("shared-");
    const sharedFile = join(shared, "shared.txt");
    Deno.writeTextFileSync(sharedFile, "shared\n");
    const writable = tempDir("writable-");
    const config = sandboxConfig(world, [
      ...["--try-read", sharedFile, "--try-write", join(shared, "no.txt")],
      ...["--try-write", join(writable, "yes.txt")],
      ...["--try-connect", String(listener.port), "--mcp-http", "--mcp-call"],
    ], {
      "sandbox-read-paths": [
        ...sandboxConfig(world, []).sandboxReadPaths,
        shared,
      ],
      "sandbox-write-paths": [writable],
    });
    const log = await runCompleted(h.manager, {
      input: { text: "hi" },
      config,
      assets: sampleAssets(),
    });
    const reply = log.messages().at(-1)!;
    assert.match(reply, /\nmcp: \d+ tools/, "the assets server answered");
    const lines = reachLines(reply);
    assert.equal(lines[`try-read ${sharedFile}`], "ok shared");
    assert.match(lines[`try-write ${join(shared, "no.txt")}`], /^error /);
    assert.equal(lines[`try-write ${join(writable, "yes.txt")}`], "ok");
    assert.match(lines[`try-connect ${listener.port}`], /^error /);
  } finally {
    listener.close();
    await h.close();
  }
});

/** Starts a stalling confined run with a TERM-ignoring grandchild; resolves once the agent is busy. */
async function stalledConfinedRun(extra: Record<string, unknown> = {}) {
  const world = sandboxWorld();
  const h = harness({ environment: world.environment });
  const config = sandboxConfig(
    world,
    ["--stall-prompt", "--ignore-cancel", "--grandchild"],
    { "cancel-grace": 1, ...extra },
  );
  const { run } = await h.manager.start({ input: { text: "hi" }, config });
  const log = new EventLog(run);
  await log.waitFor((event) => event.type === "message.delta");
  const marked = markedProcesses(world.marker);
  // bwrap, its init, the agent, the grandchild sh and its sleep.
  assert.ok(marked.length >= 5, `processes of the run: ${marked}`);
  const inside = marked.filter((pid) =>
    pidNamespace(pid) !== pidNamespace("self")
  );
  assert.ok(inside.length >= 4, "the agent's processes are in a PID namespace");
  return { world, h, run, log };
}

Deno.test("sandboxed teardown: a cancelled run's stubborn agent and its grandchild are gone when the run ends", async () => {
  const { world, h, run, log } = await stalledConfinedRun();
  try {
    run.handle.cancel();
    assert.equal((await run.done).status, "cancelled");
    assert.equal(log.events.at(-1)?.data.code, "run.cancelled");
    assert.deepEqual(markedProcesses(world.marker), []);
  } finally {
    await h.close();
  }
});

Deno.test("sandboxed teardown: a run that times out leaves no process of its agent", async () => {
  const { world, h, run, log } = await stalledConfinedRun({ timeout: 8 });
  try {
    assert.equal((await run.done).status, "failed");
    assert.equal(log.events.at(-1)?.data.code, "run.timeout");
    assert.deepEqual(markedProcesses(world.marker), []);
  } finally {
    await h.close();
  }
});

Deno.test("the reaper kills a confined agent's group left by a dead runner: bubblewrap, the agent and its stubborn grandchild", async () => {
  const world = sandboxWorld();
  const dir = tempDir("agents-");
  const launch = prepareAgentCommand(
    sandboxConfig(world, ["--grandchild", "--pid-file", "pids.json"]),
    { environment: world.environment },
  );
  const agent = spawnAgent({
    argv: launch.argv,
    cwd: launch.cwd,
    env: launch.env,
    sandbox: launch.sandbox,
    registry: createReaperRegistry(dir),
  });
  try {
    // The fixture answers initialize only after its grandchild runs.
    const writer = agent.stdin.getWriter();
    await writer.write(new TextEncoder().encode(
      JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: 1 },
      }) + "\n",
    ));
    writer.releaseLock();
    const reader = agent.stdout.getReader();
    assert.equal((await reader.read()).done, false, "initialize answered");
    reader.releaseLock();
    assert.ok(existsSync(join(launch.cwd, "pids.json")));
    assert.ok(markedProcesses(world.marker).length >= 5);
    // Its runner died (kill -9): the record now names a dead owner.
    const record = join(dir, `${agent.pid}.json`);
    const dead = new Deno.Command("true").spawn();
    await dead.status;
    Deno.writeTextFileSync(
      record,
      JSON.stringify({
        ...JSON.parse(Deno.readTextFileSync(record)),
        ownerPid: dead.pid,
      }),
    );
    const report = await reapLeftoverGroups(dir);
    assert.deepEqual(report.killed, [agent.pid]);
    await agent.exited;
    assert.deepEqual(markedProcesses(world.marker), []);
  } finally {
    await agent.terminate({ graceMs: 100 });
  }
});
