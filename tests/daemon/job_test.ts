/**
 * The daemon's pieces without a hub (the `run.start` payload in both
 * directions is `tests/relay/payload_test.ts`'s): the job runner with a real fixture agent, the hub's MCP hook,
 * token rules and the `runner daemon`/`runner daemons` command lines.
 */

import { assertRelayFrame } from "../contracts.ts";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import type { DaemonJob } from "../../lib/daemon/client.ts";
import { createDaemonJobRunner } from "../../lib/daemon/job.ts";
import { hubMcpHandlerFor } from "../../lib/locations/daemon.ts";
import { mapRunStart } from "../../lib/relay/payload.ts";
import { hubRunStart } from "../daemon_test_helpers.ts";
import { RunnerError } from "../../lib/errors.ts";
import { FenceStore } from "../../lib/hub/fences.ts";
import type { JsonObject } from "../../lib/relay.ts";
import { markerFileName } from "../../lib/relay.ts";
import {
  checkListenerToken,
  isLoopbackHost,
  looksWeak,
} from "../../lib/hub/token_rules.ts";
import {
  daemonCliArgs,
  fixtureCommand,
  isAlive,
  runCli,
  spawnCli,
  tempDir,
} from "../helpers.ts";

const MAP_OPTIONS = {
  jobId: "job-1",
  fallbackCwd: "/srv/daemon",
  home: "/home/al",
};

/** The runner details each recorded event came with. */
const RUNNER_DETAILS = new WeakMap<JsonObject, JsonObject>();

/** The runner's own `data` values of a recorded wire event. */
function runnerData(event: JsonObject): JsonObject {
  return (RUNNER_DETAILS.get(event)?.data ?? {}) as JsonObject;
}

/** A job as runDaemonClient would hand it over, recording what it emits (each checked against LangBot's model). */
function fakeJob(payload: JsonObject) {
  const events: JsonObject[] = [];
  const controller = new AbortController();
  const firstDelta = Promise.withResolvers<void>();
  const job: DaemonJob = {
    jobId: "job-x",
    payload,
    emit(event, runner) {
      assertRelayFrame({
        type: "run.event",
        job_id: "job-x",
        event,
        ...(runner ? { runner } : {}),
      }, "daemon->hub");
      events.push(event);
      if (runner) RUNNER_DETAILS.set(event, runner);
      if (event.type === "message.delta") firstDelta.resolve();
    },
    signal: controller.signal,
    mcp: () => Promise.resolve(null),
    hubCapabilities: [],
    onPermissionAnswer() {},
  };
  return { job, events, controller, firstDelta: firstDelta.promise };
}

Deno.test("a refused payload becomes one run.failed and a confirmed cleanup", async () => {
  const runner = createDaemonJobRunner();
  const { job, events } = fakeJob({
    run_id: "r",
    prompt_text: "hi",
    config: { cwd: "/tmp" },
  });
  assert.deepEqual(await runner.runJob(job), { cleanupConfirmed: true });
  assert.deepEqual(
    events.map((e) => [
      e.type,
      (e.data as JsonObject).code,
      runnerData(e).code,
    ]),
    [["run.failed", "acp.daemon_config_invalid", "config.invalid"]],
  );
});

Deno.test("an empty prompt is refused before any agent or session work", async () => {
  const runner = createDaemonJobRunner();
  const record = join(tempDir(), "record.jsonl");
  const { job, events } = fakeJob({
    run_id: "r",
    prompt_text: "  ",
    input: { text: "", attachments: [], contents: [] },
    config: {
      provider: "custom",
      acp_command: fixtureCommand("--record", record),
      cwd: tempDir(),
    },
  });
  assert.deepEqual(await runner.runJob(job), { cleanupConfirmed: true });
  assert.deepEqual(events.map((e) => e.type), ["run.failed"]);
  const data = events[0].data as JsonObject;
  assert.deepEqual([data.code, runnerData(events[0]).code, data.retryable], [
    "acp.daemon_empty_prompt",
    "config.invalid",
    false,
  ], "daemon.py's code on the wire, ours kept");
  assert.match(
    String(data.error),
    /input needs text or at least one attachment/,
  );
  assert.ok(!existsSync(record), "no agent was started");
});

/**
 * A job runner and one job of the fixture agent (or `command`) with `config`,
 * whose emitted events are collected in `events`.
 */
function fixtureJob(config: JsonObject, command = fixtureCommand()) {
  const runner = createDaemonJobRunner();
  const { job, events } = fakeJob({
    run_id: "r",
    prompt_text: "hi",
    config: {
      provider: "custom",
      acp_command: command,
      cwd: tempDir(),
      ...config,
    },
  });
  return { runner, job, events };
}

/** Runs one job of the fixture agent (or `command`) and returns its events. */
async function jobEvents(
  config: JsonObject,
  command = fixtureCommand(),
): Promise<JsonObject[]> {
  const { runner, job, events } = fixtureJob(config, command);
  assert.deepEqual(await runner.runJob(job), { cleanupConfirmed: true });
  return events;
}

Deno.test("job events use the relay's spellings: whole seconds, finish_reason stop with the ACP stop reason beside the event", async () => {
  const events = await jobEvents({});
  assert.deepEqual(events.map((e) => e.type), [
    "run.started",
    "state.updated",
    "message.delta",
    "message.completed",
    "run.completed",
  ]);
  for (const event of events) {
    const seconds = event.timestamp as number;
    assert.ok(Number.isInteger(seconds), `whole seconds: ${seconds}`);
    assert.ok(seconds > 1e9 && seconds < 1e11, `seconds: ${seconds}`);
    const ms = RUNNER_DETAILS.get(event)?.timestamp_ms as number;
    assert.equal(Math.floor(ms / 1000), seconds);
  }
  const data = events.at(-1)!.data as JsonObject;
  assert.deepEqual([
    data.finish_reason,
    runnerData(events.at(-1)!).finish_reason,
  ], [
    "stop",
    "end_turn",
  ]);
});

Deno.test("failures daemon.py also reports carry its codes on the wire, ours beside the event", async () => {
  const failure = (events: JsonObject[]) => {
    const data = events.at(-1)!.data as JsonObject;
    return [data.code, runnerData(events.at(-1)!).code];
  };
  assert.deepEqual(
    failure(await jobEvents({}, "/nonexistent/bin/agent-xyz --acp")),
    ["acp.command_not_found", "acp.missing_binary"],
  );
  assert.deepEqual(
    failure(
      await jobEvents({ timeout: 0.3 }, fixtureCommand("--stall-prompt")),
    ),
    ["acp.daemon_timeout", "run.timeout"],
  );
  assert.deepEqual(
    failure(await jobEvents({ provider: null, acp_command: null })),
    ["acp.daemon_config_invalid", "config.invalid"],
  );
  assert.deepEqual(
    failure(await jobEvents({ create_session_if_missing: false })),
    ["acp.session_missing", undefined],
  );
});

Deno.test("run.cancel: the agent group is gone when runJob returns, and the job emits no terminal event", async () => {
  const runner = createDaemonJobRunner();
  const pidFile = join(tempDir(), "pids.json");
  const { job, events, controller, firstDelta } = fakeJob({
    run_id: "r",
    prompt_text: "hold",
    config: {
      provider: "custom",
      acp_command: fixtureCommand(
        "--stall-prompt",
        "--grandchild",
        "--pid-file",
        pidFile,
      ),
      cwd: tempDir(),
    },
  });
  const running = runner.runJob(job);
  await firstDelta;
  const pids = JSON.parse(Deno.readTextFileSync(pidFile));
  controller.abort();
  assert.deepEqual(await running, { cleanupConfirmed: true });
  for (const pid of Object.values(pids) as number[]) assert.ok(!isAlive(pid));
  assert.ok(
    !events.some((e) => e.type === "run.failed" || e.type === "run.completed"),
  );
  assert.equal(runner.active, 0);
});

Deno.test("cancelAll ends jobs with its reason and refuses new ones", async () => {
  const runner = createDaemonJobRunner();
  const { job, events, firstDelta } = fakeJob({
    run_id: "r",
    prompt_text: "hold",
    config: {
      provider: "custom",
      acp_command: fixtureCommand("--stall-prompt"),
      cwd: tempDir(),
    },
  });
  const running = runner.runJob(job);
  await firstDelta;
  const reason = new RunnerError("runner.shutting_down", "daemon stopping");
  await runner.cancelAll(reason);
  assert.deepEqual(await running, { cleanupConfirmed: true });
  assert.equal(
    (events.at(-1)?.data as JsonObject).code,
    "runner.shutting_down",
  );
  const late = fakeJob({ prompt_text: "x", config: { provider: "codex" } });
  await runner.runJob(late.job);
  assert.equal(
    (late.events[0].data as JsonObject).code,
    "runner.shutting_down",
  );
});

Deno.test("hubMcpHandlerFor answers with the run's handler, else like the hub's default", async () => {
  const handler = hubMcpHandlerFor((runId) =>
    runId === "with-assets"
      ? { handle: (message) => Promise.resolve({ echoed: message }) }
      : undefined
  );
  const job = (runId: string) => ({ jobId: "j", runId, daemonId: "d" });
  const request = { jsonrpc: "2.0", id: 7, method: "tools/list" };
  assert.deepEqual(await handler(job("with-assets"), request), {
    echoed: request,
  });
  assert.deepEqual(await handler(job("plain"), request), {
    jsonrpc: "2.0",
    id: 7,
    error: { code: -32000, message: "no assets for this run" },
  });
  assert.equal(
    await handler(job("plain"), { jsonrpc: "2.0", method: "notify" }),
    null,
  );
});

Deno.test("listener tokens: required off loopback, strong, unpublished", () => {
  const refused = (token: string | undefined, host = "0.0.0.0") =>
    assert.throws(
      () => checkListenerToken({ token, host, purpose: "--daemon-token" }),
      (error: unknown) =>
        error instanceof RunnerError && error.code === "config.invalid" &&
        error.message.includes("runner token") &&
        (token === undefined || !error.message.includes(token)),
    );
  checkListenerToken({ host: "127.0.0.1", purpose: "--daemon-token" });
  checkListenerToken({ host: "[::1]", purpose: "--daemon-token" });
  refused(undefined);
  refused("tiny-Q7x");
  refused("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
  refused(" Xk2v9Lq7Rt4Wm8Np3Zs6Yb1Hd5Gf0Jc ");
  refused("golden-token-7f3a9c2e5b1d4f6a8c0e2b4d6f8a");
  refused("EXAMPLE-ONLY-do-not-use-4mX9qT2vL7pR8sK3wN6y", "127.0.0.1");
  checkListenerToken({
    token: "Xk2v9Lq7Rt4Wm8Np3Zs6Yb1Hd5Gf0Jc-Ae",
    host: "0.0.0.0",
    purpose: "--daemon-token",
  });
  assert.equal(looksWeak("short"), true);
  assert.equal(looksWeak("Xk2v9Lq7Rt4Wm8Np3Zs6Yb1Hd5Gf0Jc-Ae"), false);
  assert.equal(isLoopbackHost("localhost"), true);
  assert.equal(isLoopbackHost("127.0.0.2"), true);
  assert.equal(isLoopbackHost("203.0.113.5"), false);
});

Deno.test("runner daemon refuses bad options with exit 2 and a hint", async () => {
  const help = await runCli(["daemon", "--help"]);
  assert.equal(help.code, 0);
  assert.match(help.stdout, /--token-file/);
  const noId = await runCli(["daemon", "--url", "ws://127.0.0.1:1"]);
  assert.equal(noId.code, 2);
  assert.match(noId.stderr, /config\.invalid.*--daemon-id is required/);
  const http = await runCli(daemonCliArgs("http://x:1", "a"));
  assert.equal(http.code, 2);
  assert.match(http.stderr, /ws:\/\//);
  const ping = await runCli(
    daemonCliArgs("ws://127.0.0.1:1", "a", "--ping-timeout", "0"),
  );
  assert.equal(ping.code, 2);
  assert.match(ping.stderr, /--ping-timeout must be a number of seconds > 0/);
});

Deno.test("runner daemon --log-level and --log-format shape its log like runner serve's", async () => {
  const bad = await runCli(
    daemonCliArgs("ws://127.0.0.1:1", "a", "--log-level", "loud"),
  );
  assert.equal(bad.code, 2);
  assert.match(
    bad.stderr,
    /--log-level must be one of debug, info, warn, error/,
  );
  // No hub listens on port 1: the daemon warns (no token), fails to connect
  // and retries until it is stopped (its start and stop are info lines).
  const child = spawnCli(
    daemonCliArgs(
      "ws://127.0.0.1:1",
      "quiet-box",
      "--data-dir",
      tempDir(),
      "--log-level",
      "warn",
      "--log-format",
      "text",
    ),
    { env: { RUNNER_DAEMON_TOKEN: "" } },
  );
  let text = "";
  const decoder = new TextDecoder();
  const reader = child.stderr.getReader();
  // The first failed connection comes after start-up (signals handled).
  while (!text.includes("disconnected from the hub")) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  child.kill("SIGTERM");
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  await child.stdout.cancel();
  assert.equal((await child.status).code, 0);
  // Text lines (stderr is no terminal: the default would be JSON), and
  // nothing below warn ("daemon starting" is info).
  const lines = text.trim().split("\n");
  assert.ok(lines.some((line) => / WARN no daemon token given/.test(line)));
  for (const line of lines) {
    assert.match(line, /^\d\d:\d\d:\d\d (WARN|ERROR) /);
  }
});

Deno.test("runner daemons unfence --yes removes the marker; list shows markers", async () => {
  const dataDir = tempDir();
  const stateDir = join(dataDir, "relay");
  await new FenceStore(stateDir).ensureMarker("box-1");
  const listed = await runCli(["daemons", "list", "--data-dir", dataDir]);
  assert.equal(listed.code, 0);
  assert.match(listed.stdout, /box-1\s+\?\s+yes/);
  const unfence = ["daemons", "unfence", "box-1", "--yes"];
  const done = await runCli([...unfence, "--data-dir", dataDir]);
  assert.equal(done.code, 0, done.stderr);
  assert.ok(!existsSync(join(stateDir, markerFileName("box-1"))));
  const again = await runCli([...unfence, "--data-dir", dataDir]);
  assert.equal(again.code, 1);
  assert.match(again.stderr, /was not fenced/);
});

Deno.test("ask on a daemon whose hub lacks permission.ask takes the fallback and says so first", async () => {
  const events = await jobEvents(
    { permission_decision: "ask", permission_fallback: "reject_always" },
    fixtureCommand("--permission"),
  );
  assert.equal(events[0].type, "permission.unavailable");
  assert.equal((events[0].data as JsonObject).fallback, "reject_always");
  assert.match(
    String((events[0].data as JsonObject).reason),
    /no permission\.ask capability/,
  );
  assert.ok(!events.some((e) => e.type === "permission.requested"));
  const decided = events.find((e) => e.type === "permission.decided")!;
  assert.equal((decided.data as JsonObject).by, "policy");
  assert.equal((decided.data as JsonObject).decision, "reject_always");
});

Deno.test("ask on a daemon whose hub confirmed permission.ask waits for the hub's run.permission answer", async () => {
  const { runner, job, events } = fixtureJob(
    { permission_decision: "ask" },
    fixtureCommand("--permission"),
  );
  let deliver: ((id: string, answer: JsonObject) => void) | undefined;
  const asked = Promise.withResolvers<string>();
  const emit = job.emit;
  job.emit = (event) => {
    emit(event);
    if (event.type === "permission.requested") {
      asked.resolve(String((event.data as JsonObject).request_id));
    }
  };
  const withHub: DaemonJob = {
    ...job,
    hubCapabilities: ["permission.ask"],
    onPermissionAnswer(receive) {
      deliver = receive;
    },
  };
  const running = runner.runJob(withHub);
  const requestId = await asked.promise;
  deliver!(requestId, { option_id: "allow_always" });
  assert.deepEqual(await running, { cleanupConfirmed: true });
  const decided = events.find((e) => e.type === "permission.decided")!;
  assert.equal((decided.data as JsonObject).by, "caller");
  assert.equal((decided.data as JsonObject).decision, "allow_always");
  const done = events.findLast((e) => e.type === "message.completed")!;
  assert.match(
    String(((done.data as JsonObject).message as JsonObject).content),
    /^permission: allow_always/,
  );
});

Deno.test("run.start's stored_session_config (our hub's) is the conversation's remembered values: applied where the job asks none, changed ones reported; LangBot's hub sends none and nothing is remembered", async () => {
  const payload = hubRunStart(
    { provider: "custom", "acp-command": "agent" },
    { sessionMemory: { model: "fast", mode: "plan" } },
  );
  const sent = payload.config as JsonObject;
  assert.deepEqual(sent.stored_session_config, { model: "fast", mode: "plan" });
  assert.deepEqual(
    mapRunStart(JSON.parse(JSON.stringify(payload)), MAP_OPTIONS)
      .sessionMemory,
    { model: "fast", mode: "plan" },
  );
  assert.throws(
    () =>
      mapRunStart({
        run_id: "r",
        config: {
          provider: "codex",
          cwd: "/tmp",
          stored_session_config: "plan",
        },
      }, MAP_OPTIONS),
    /stored_session_config: must be an object/,
  );
  const command = fixtureCommand("--session-config", "both");
  const memoryOf = (events: JsonObject[]) =>
    events.filter((e) =>
      e.type === "state.updated" &&
      (e.data as JsonObject).key === "external.acp_session_config"
    ).map((e) => (e.data as JsonObject).value);
  // session.configured is not LangBot's: its data travels as it is.
  const configuredOf = (events: JsonObject[]) =>
    events.find((e) => e.type === "session.configured")!.data as JsonObject;
  const fromOurHub = await jobEvents({
    mode: "acceptEdits",
    stored_session_config: { model: "fast", mode: "plan" },
  }, command);
  assert.deepEqual(configuredOf(fromOurHub).remembered, ["model"]);
  assert.deepEqual(memoryOf(fromOurHub), [{
    model: "fast",
    mode: "acceptEdits",
  }]);
  // LangBot's hub hands back no conversation state in run.start.
  const fromLangBot = await jobEvents({ mode: "plan" }, command);
  assert.deepEqual(memoryOf(fromLangBot), []);
  const data = configuredOf(fromLangBot);
  assert.deepEqual([data.model, data.mode, data.remembered], [
    "smart",
    "plan",
    undefined,
  ]);
});
