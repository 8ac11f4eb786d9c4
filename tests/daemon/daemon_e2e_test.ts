/**
 * Daemon mode end to end: an in-test hub and run manager (real store) on
 * 127.0.0.1, a real `runner daemon` subprocess with the binary's permission
 * flags, and the fixture agent started by that daemon.
 */

import { runnerLocations } from "../../lib/locations/runner_locations.ts";
import { type RelayTap, startRelayTap } from "../relay_tap.ts";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { randomToken } from "../../lib/cli/providers.ts";
import { parseRunConfig } from "../../lib/config.ts";
import { type AssetsHook, createAssetsHook } from "../../lib/assets/wiring.ts";
import {
  createDaemonLocation,
  describeDaemons,
  hubMcpHandlerFor,
  startHubListener,
} from "../../lib/locations/daemon.ts";
import { RUNNER_VERSION } from "../../lib/version.ts";
import type { RunEvent } from "../../lib/events.ts";
import {
  createHub,
  type HubLogEntry,
  type RelayHub,
  serveHub,
} from "../../lib/hub/relay_hub.ts";
import { markerFileName } from "../../lib/relay.ts";
import {
  createRunManager,
  type ManagedRun,
  type RunManager,
} from "../../lib/run/manager.ts";
import { type RunStore } from "../../lib/store/types.ts";
import { EventLog, makeGate } from "../engine_helpers.ts";
import { pathWithoutBwrap } from "../sandbox_helpers.ts";
import {
  agentPids,
  daemonCliArgs,
  fixtureCommand,
  isAlive,
  openStoreNow,
  readRecord,
  runCli,
  spawnCli,
  tempDir,
} from "../helpers.ts";

const TOKEN = "daemon-e2e-token-Jq7Xw2Lk9Vb4Nz6Tc1Rm8Hs3";

type LogLine = Record<string, unknown>;

/** A `runner daemon` subprocess whose JSON log lines can be awaited. */
class DaemonProcess {
  readonly lines: LogLine[] = [];
  stderrText = "";
  #waiters: { test: (line: LogLine) => boolean; resolve: () => void }[] = [];
  readonly #child: Deno.ChildProcess;
  readonly #drained: Promise<unknown>;
  /** Checks every frame between this daemon and its hub against the relay contract. */
  readonly tap: RelayTap;

  constructor(options: {
    url: string;
    daemonId: string;
    dataDir: string;
    token?: string;
    /** The daemon's `PATH` (e.g. one without bubblewrap). */
    path?: string;
  }) {
    this.tap = startRelayTap(options.url);
    this.#child = spawnCli(
      daemonCliArgs(
        this.tap.url,
        options.daemonId,
        "--data-dir",
        options.dataDir,
        "--reconnect-delay",
        "0.1",
      ),
      {
        env: {
          RUNNER_DAEMON_TOKEN: options.token ?? TOKEN,
          ...(options.path ? { PATH: options.path } : {}),
        },
      },
    );
    this.#drained = Promise.all([
      this.#child.stdout.cancel(),
      this.#readStderr(),
    ]);
  }

  get pid(): number {
    return this.#child.pid;
  }

  async #readStderr(): Promise<void> {
    let pending = "";
    for await (
      const chunk of this.#child.stderr.pipeThrough(new TextDecoderStream())
    ) {
      this.stderrText += chunk;
      pending += chunk;
      let newline: number;
      while ((newline = pending.indexOf("\n")) >= 0) {
        const text = pending.slice(0, newline);
        pending = pending.slice(newline + 1);
        let line: LogLine;
        try {
          line = JSON.parse(text);
        } catch {
          line = { msg: text };
        }
        this.lines.push(line);
        this.#waiters = this.#waiters.filter((waiter) => {
          if (!waiter.test(line)) return true;
          waiter.resolve();
          return false;
        });
      }
    }
  }

  /** Resolves once a log line whose `msg` contains `text` was written. */
  waitForLog(text: string): Promise<void> {
    const test = (line: LogLine) => String(line.msg).includes(text);
    if (this.lines.some(test)) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push({ test, resolve }));
  }

  /** Sends `signal` and returns the exit code. */
  async stop(signal: Deno.Signal = "SIGTERM"): Promise<number> {
    try {
      this.#child.kill(signal);
    } catch { /* already gone */ }
    const status = await this.#child.status;
    await this.#drained;
    await this.tap.close();
    this.tap.assertClean();
    return status.code;
  }
}

/** An in-test hub with a run manager whose `location=daemon` is the daemon location. */
class HubHarness {
  readonly store: RunStore;
  readonly hub: RelayHub;
  readonly manager: RunManager;
  readonly url: string;
  readonly #close: () => Promise<void>;
  readonly #logs: HubLogEntry[] = [];
  #waiters: { text: string; resolve: () => void }[] = [];

  constructor(
    readonly dataDir: string,
    options: { token?: string; assets?: AssetsHook } = {},
  ) {
    const { assets } = options;
    this.store = openStoreNow(dataDir);
    this.hub = createHub({
      token: options.token ?? TOKEN,
      stateDir: join(dataDir, "relay"),
      mcpHandler: assets &&
        hubMcpHandlerFor((runId) => assets.backendForRun(runId)),
      onLog: (entry) => {
        this.#logs.push(entry);
        this.#waiters = this.#waiters.filter((waiter) => {
          if (!entry.message.includes(waiter.text)) return true;
          waiter.resolve();
          return false;
        });
      },
    });
    const server = serveHub({ hub: this.hub });
    this.url = server.url;
    this.manager = createRunManager({
      store: this.store,
      locations: runnerLocations(
        createDaemonLocation({ hub: this.hub, assets }),
      ),
    });
    this.#close = async () => {
      await this.hub.close();
      await server.close();
      await assets?.close();
      await this.store.close();
    };
  }

  /** Resolves once the hub logged a message containing `text`. */
  waitForLog(text: string): Promise<void> {
    if (this.#logs.some((entry) => entry.message.includes(text))) {
      return Promise.resolve();
    }
    return new Promise((resolve) => this.#waiters.push({ text, resolve }));
  }

  close(): Promise<void> {
    return this.#close();
  }
}

function daemonConfig(
  daemonId: string,
  flags: string[],
  workspace = tempDir(),
  extra: Record<string, unknown> = {},
) {
  return parseRunConfig({
    provider: "custom",
    "acp-command": fixtureCommand(...flags),
    location: "daemon",
    "daemon-id": daemonId,
    workspace,
    ...extra,
  });
}

function deltaWith(text: string) {
  return (event: RunEvent) =>
    event.type === "message.delta" &&
    String((event.data.chunk as { content?: string }).content).includes(text);
}

function assertOneTerminalAndIncreasingSequences(log: EventLog): void {
  const terminal = log.events.filter((event) =>
    event.type === "run.completed" || event.type === "run.failed"
  );
  assert.equal(terminal.length, 1, JSON.stringify(terminal));
  assert.equal(log.events.at(-1), terminal[0]);
  assert.deepEqual(
    log.events.map((event) => event.sequence),
    log.events.map((_, index) => index + 1),
  );
}

/**
 * Runs `body` against a fresh hub and a daemon connected to it as `daemonId`,
 * then checks the daemon exits 0 on SIGTERM. Returns the stopped daemon.
 */
async function withHubAndDaemon(
  daemonId: string,
  body: (hub: HubHarness, daemon: DaemonProcess) => Promise<void>,
  options: { token?: string; assets?: AssetsHook } = {},
): Promise<DaemonProcess> {
  const hub = new HubHarness(tempDir(), options);
  const daemon = new DaemonProcess({
    url: hub.url,
    daemonId,
    dataDir: tempDir(),
    token: options.token,
  });
  try {
    await body(hub, daemon);
  } finally {
    assert.equal(await daemon.stop(), 0);
    await hub.close();
  }
  return daemon;
}

/**
 * Starts a run whose agent stalls in its prompt after one delta, with a
 * SIGTERM-ignoring grandchild; resolves once the delta arrived.
 */
async function startStalledRun(
  hub: HubHarness,
  daemonId: string,
  options: { text: string; workspace?: string },
): Promise<{ run: ManagedRun; log: EventLog; pids: number[] }> {
  const pidFile = join(tempDir(), "pids.json");
  const { run } = await hub.manager.start({
    input: { text: options.text },
    config: daemonConfig(daemonId, [
      "--stall-prompt",
      "--grandchild",
      "--pid-file",
      pidFile,
    ], options.workspace),
  });
  const log = new EventLog(run);
  await log.waitFor((event) => event.type === "message.delta");
  return { run, log, pids: agentPids(pidFile) };
}

Deno.test("a location=daemon run streams the agent's text from the daemon's machine", async () => {
  await withHubAndDaemon("laptop", async (hub) => {
    const record = join(tempDir(), "record.jsonl");
    const { run } = await hub.manager.start({
      input: { text: "hello daemon" },
      // delta-coalesce-ms travels in run.start: each chunk stays a delta.
      config: daemonConfig(
        "laptop",
        ["--chunks", "3", "--record", record],
        undefined,
        { "delta-coalesce-ms": 0 },
      ),
    });
    const log = new EventLog(run);
    const result = await run.done;
    assert.equal(result.status, "completed");
    assert.equal(log.ofType("message.delta").length, 3);
    assert.deepEqual(log.messages(), ["echo: hello daemon (turn 1)"]);
    assert.ok(log.events.every((event) => event.run_id === run.runId));
    assertOneTerminalAndIncreasingSequences(log);
    assert.equal((await hub.store.getRun(run.runId))?.status, "completed");
    const created = readRecord(record).find((line) =>
      line.method === "session/new"
    );
    const servers = (created?.params as { mcpServers: { name: string }[] })
      .mcpServers;
    assert.deepEqual(servers.map((server) => server.name), ["langbot_agent"]);
  });
});

Deno.test("the conversation's session survives a daemon restart between runs", async () => {
  const hub = new HubHarness(tempDir());
  const daemonData = tempDir();
  const config = daemonConfig("desk", ["--resume", "--state-dir", tempDir()]);
  const startDaemon = () =>
    new DaemonProcess({ url: hub.url, daemonId: "desk", dataDir: daemonData });
  const completedTurn = async (text: string) => {
    const { run } = await hub.manager.start({
      conversationId: "conv",
      input: { text },
      config,
    });
    const log = new EventLog(run);
    assert.equal((await run.done).status, "completed");
    return log;
  };
  let daemon = startDaemon();
  try {
    const firstLog = await completedTurn("one");
    assert.deepEqual(firstLog.messages(), ["echo: one (turn 1)"]);
    assert.equal(firstLog.ofType("state.updated").length, 1);
    assert.equal(await daemon.stop(), 0);

    daemon = startDaemon();
    const secondLog = await completedTurn("two");
    assert.deepEqual(secondLog.messages(), ["echo: two (turn 2)"]);
    assert.equal(secondLog.ofType("state.updated").length, 0);
  } finally {
    assert.equal(await daemon.stop(), 0);
    await hub.close();
  }
});

Deno.test("three follow-ups through the daemon: four turns, one terminal event, increasing sequences", async () => {
  await withHubAndDaemon("steer", async (hub) => {
    const gate = await makeGate();
    const config = daemonConfig("steer", [
      "--gate-fifo",
      gate.path,
      "--resume",
      "--state-dir",
      tempDir(),
    ]);
    const started = await hub.manager.start({
      conversationId: "c",
      input: { text: "first" },
      config,
    });
    assert.equal(started.kind, "started");
    const log = new EventLog(started.run);
    await log.waitFor(deltaWith("first"));
    for (const text of ["f1", "f2", "f3"]) {
      const steered = await hub.manager.start({
        conversationId: "c",
        input: { text },
        config,
      });
      assert.equal(steered.kind, "steered");
    }
    // Each turn runs in a new agent process: release the gate only once
    // that process has sent its text and waits on the gate.
    for (const text of ["first", "f1", "f2", "f3"]) {
      await log.waitFor(deltaWith(text));
      await gate.release();
    }
    assert.equal((await started.run.done).status, "completed");
    assert.deepEqual(log.messages(), [
      "echo: first (turn 1)",
      "echo: f1 (turn 2)",
      "echo: f2 (turn 3)",
      "echo: f3 (turn 4)",
    ]);
    // One turn.started per follow-up (from the hub; the daemon's jobs send
    // none), each right before its job's run.started.
    assert.deepEqual(
      log.events.flatMap((e, i) =>
        e.type === "turn.started" ? [[e.data, log.events[i + 1]?.type]] : []
      ),
      [2, 3, 4].map((turn) => [
        { turn, input: { text: `f${turn - 1}` } },
        "run.started",
      ]),
    );
    assertOneTerminalAndIncreasingSequences(log);
    assert.equal(log.events.at(-1)?.type, "run.completed");
  });
});

Deno.test("cancel: the daemon's agent group is gone before the run ends, with one run.cancelled", async () => {
  await withHubAndDaemon("cancel-me", async (hub) => {
    const { run, log, pids } = await startStalledRun(hub, "cancel-me", {
      text: "wait",
    });
    assert.ok(pids.every(isAlive));
    run.handle.cancel();
    const result = await run.done;
    assert.deepEqual(pids.filter(isAlive), []);
    assert.equal(result.status, "cancelled");
    assertOneTerminalAndIncreasingSequences(log);
    assert.equal(log.events.at(-1)?.data.code, "run.cancelled");
    const [info] = hub.hub.listDaemons();
    assert.deepEqual([info.daemonId, info.connected, info.fenced], [
      "cancel-me",
      true,
      false,
    ]);
  });
});

Deno.test("SIGTERM stops the daemon cleanly: jobs end as runner.shutting_down, no fence, exit 0", async () => {
  const hub = new HubHarness(tempDir());
  const daemon = new DaemonProcess({
    url: hub.url,
    daemonId: "polite",
    dataDir: tempDir(),
  });
  try {
    const { run, log, pids } = await startStalledRun(hub, "polite", {
      text: "wait",
    });
    assert.equal(await daemon.stop("SIGTERM"), 0);
    assert.deepEqual(pids.filter(isAlive), []);
    const result = await run.done;
    assert.equal(result.code, "runner.shutting_down");
    assertOneTerminalAndIncreasingSequences(log);
    await hub.waitForLog("daemon disconnected");
    assert.deepEqual(hub.hub.listDaemons(), []);
    assert.deepEqual([...Deno.readDirSync(join(hub.dataDir, "relay"))], []);
  } finally {
    await daemon.stop();
    await hub.close();
  }
});

Deno.test("kill -9 of the daemon: disconnected, fenced across hubs, reaped on restart (without bubblewrap), back after unfence", async () => {
  const hubData = tempDir();
  const daemonData = tempDir();
  // With bwrap the job's PID namespace dies with the daemon: nothing is left
  // to reap (tests/security/outlive_test.ts).
  const path = pathWithoutBwrap();
  const stateDir = join(hubData, "relay");
  const workspace = tempDir();
  const first = new HubHarness(hubData);
  const crashed = new DaemonProcess({
    url: first.url,
    daemonId: "crashy",
    dataDir: daemonData,
    path,
  });
  let pids: number[];
  try {
    const stalled = await startStalledRun(first, "crashy", {
      text: "work",
      workspace,
    });
    const { run, log } = stalled;
    pids = stalled.pids;
    assert.notEqual(await crashed.stop("SIGKILL"), 0);
    const result = await run.done;
    assert.equal(result.code, "agent_runtime.daemon_disconnected");
    const failed = log.events.at(-1)!;
    assert.equal(failed.data.retryable, false);
    assertOneTerminalAndIncreasingSequences(log);
    assert.ok(existsSync(join(stateDir, markerFileName("crashy"))));
    assert.equal(first.hub.listDaemons()[0].fenced, true);
    // The SIGTERM-ignoring grandchild outlived the daemon.
    assert.ok(isAlive(pids[1]) && isAlive(pids[2]));
  } finally {
    await first.close();
  }

  const second = new HubHarness(hubData);
  const restarted = new DaemonProcess({
    url: second.url,
    daemonId: "crashy",
    dataDir: daemonData,
    path,
  });
  try {
    assert.deepEqual(
      second.hub.listDaemons().map((d) => [d.daemonId, d.fenced]),
      [["crashy", true]],
    );
    await restarted.waitForLog("killed agent process groups");
    assert.deepEqual(pids.filter(isAlive), []);
    await restarted.waitForLog("close 1008");
    assert.equal(second.hub.listDaemons()[0].connected, false);

    const listed = await runCli([
      "daemons",
      "list",
      "--data-dir",
      hubData,
      "--json",
    ]);
    assert.equal(listed.code, 0, listed.stderr);
    assert.deepEqual(
      JSON.parse(listed.stdout).map((
        row: LogLine,
      ) => [row.daemon_id, row.fenced]),
      [["crashy", true]],
    );
    const unconfirmed = await runCli([
      "daemons",
      "unfence",
      "crashy",
      "--data-dir",
      hubData,
    ]);
    assert.equal(unconfirmed.code, 2);
    assert.match(unconfirmed.stderr, /no agent process/);
    assert.ok(existsSync(join(stateDir, markerFileName("crashy"))));

    assert.equal(await second.hub.unfence("crashy"), true);
    const { run } = await second.manager.start({
      input: { text: "again" },
      config: daemonConfig("crashy", [], workspace),
    });
    const log = new EventLog(run);
    assert.equal((await run.done).status, "completed");
    assert.deepEqual(log.messages(), ["echo: again (turn 1)"]);
  } finally {
    assert.equal(await restarted.stop(), 0);
    await second.close();
  }
});

Deno.test("an MCP request from the agent reaches the hub and the placeholder answer comes back", async () => {
  await withHubAndDaemon("mcp", async (hub) => {
    const record = join(tempDir(), "record.jsonl");
    const { run } = await hub.manager.start({
      input: { text: "tools?" },
      config: daemonConfig("mcp", ["--mcp-call", "--record", record]),
    });
    const log = new EventLog(run);
    assert.equal((await run.done).status, "completed");
    assert.deepEqual(log.messages(), [
      "echo: tools? (turn 1)\nmcp: error (initialize failed (200))",
    ]);
    const calls = readRecord(record).filter((line) => line.event === "mcp");
    assert.deepEqual(
      calls.map((call) => [call.server, call.method, call.body]),
      [
        ["langbot_agent", "initialize", {
          jsonrpc: "2.0",
          id: 1,
          error: { code: -32000, message: "no assets for this run" },
        }],
      ],
    );
  });
});

Deno.test("with the assets layer, the agent's MCP calls through the daemon reach the run's assets", async () => {
  await withHubAndDaemon("assets", async (hub) => {
    const record = join(tempDir(), "record.jsonl");
    const { run } = await hub.manager.start({
      input: { text: "what happened?" },
      config: daemonConfig(
        "assets",
        [
          "--mcp-call",
          "--mcp-tool",
          "langbot_get_current_event",
          "--record",
          record,
        ],
        tempDir(),
        { "append-run-scope-prompt": true },
      ),
      assets: { grant: { history: true }, event: { text: "from langbot" } },
    });
    const log = new EventLog(run);
    assert.equal((await run.done).status, "completed");
    assert.match(log.messages()[0], /\nmcp: [1-9]\d* tools$/);
    const lines = readRecord(record);
    const call = lines.find((line) =>
      line.event === "mcp" && line.method === "tools/call"
    );
    const body = call?.body as {
      result: { structuredContent: { event: unknown } };
    };
    assert.deepEqual(body.result.structuredContent.event, {
      text: "from langbot",
    });
    const prompt = lines.find((line) => line.method === "session/prompt");
    assert.match(JSON.stringify(prompt?.params), new RegExp(run.runId));
  }, { assets: createAssetsHook({ log: () => {} }) });
});

Deno.test("startHubListener checks the token, serves daemons, and describeDaemons lists them", async () => {
  const dataDir = tempDir();
  assert.throws(
    () => startHubListener({ host: "0.0.0.0", port: 0, dataDir }),
    /--daemon-token is required when listening on 0\.0\.0\.0/,
  );
  assert.throws(
    () => startHubListener({ port: 0, dataDir, token: TOKEN }),
    /published in the runner's docs or tests/,
  );
  const token = randomToken();
  const listener = startHubListener({ port: 0, dataDir, token });
  const daemon = new DaemonProcess({
    url: listener.server.url,
    daemonId: "listed",
    dataDir: tempDir(),
    token,
  });
  try {
    await daemon.waitForLog("connected to the hub as listed");
    const [row] = describeDaemons(listener.hub).daemons;
    assert.equal(row.daemon_id, "listed");
    assert.equal(row.connected, true);
    assert.equal(row.fenced, false);
    assert.deepEqual(row.active_jobs, []);
    assert.equal((row.metadata as { version: string }).version, RUNNER_VERSION);
  } finally {
    assert.equal(await daemon.stop(), 0);
    await listener.close();
  }
});

Deno.test("the daemon warns about a weak token without ever printing it", async () => {
  const weak = "short-but-secret-42";
  const stopped = await withHubAndDaemon("weak", async (_hub, daemon) => {
    await daemon.waitForLog("connected to the hub as weak");
    await daemon.waitForLog("token looks weak");
    assert.match(daemon.stderrText, /runner token/);
  }, { token: weak });
  assert.ok(!stopped.stderrText.includes(weak));
});
