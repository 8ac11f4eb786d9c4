/**
 * Replays the derived relay scenarios (`tests/fixtures/relay-scenarios/`):
 * what `daemon.py` and LangBot's hub write in the cases the live run against
 * LangBot's relay found broken (issue 10). Daemon side: our client and job
 * runner, with the fixture agent, must write frames compatible with
 * `daemon.py`'s (same keys and values; extra keys allowed; `free` paths may
 * differ in value) and hand the agent the same prompt. Hub side: our hub must
 * send a compatible `run.start` and take `daemon.py`'s frames, giving its
 * callers the runner's spellings.
 */

import { hubWithManager } from "../daemon_test_helpers.ts";
import { ScriptedHub, TestSocket } from "../relay_sockets.ts";
import assert from "node:assert/strict";
import { join } from "node:path";
import { parseRunConfig } from "../../lib/config.ts";
import { runDaemonClient } from "../../lib/daemon/client.ts";
import { createDaemonJobRunner } from "../../lib/daemon/job.ts";
import type { JsonObject } from "../../lib/relay.ts";
import { EventLog } from "../engine_helpers.ts";
import { fixtureCommand, readRecord, ROOT, tempDir } from "../helpers.ts";

const SCENARIOS = `${ROOT}tests/fixtures/relay-scenarios`;
const TOKEN = "scenario-token-Rk5Wq9Tz2Lm7Xc4Vb8Nh3Jd6";
const ANY = "{{ANY}}";
const PONG = '{"type": "daemon.pong"}';

interface ScenarioFrame {
  dir: "hub->daemon" | "daemon->hub";
  text?: string;
  /** Paths (`event.data.error`) whose value may differ from daemon.py's. */
  free?: string[];
  /** That many pings go unanswered, with no other frame and no close. */
  pings_unanswered?: number;
  /** A pong for each ping held by `pings_unanswered`. */
  pongs_for_held_pings?: boolean;
}

interface Scenario {
  scenario: string;
  sides: ("daemon" | "hub")[];
  agent_flags?: string[];
  run_config?: Record<string, unknown>;
  frames: ScenarioFrame[];
  agent_prompt?: unknown[];
  agent_methods?: string[];
  hub_events?: JsonObject[];
}

function loadScenarios(): Scenario[] {
  return [...Deno.readDirSync(SCENARIOS)]
    .filter((entry) => entry.name.endsWith(".json"))
    .map((entry) =>
      JSON.parse(Deno.readTextFileSync(join(SCENARIOS, entry.name)))
    )
    .sort((a, b) => a.scenario.localeCompare(b.scenario));
}

/** Fails unless `actual` has every key and value of `expected` (except `free` paths). */
function assertCompatible(
  expected: unknown,
  actual: unknown,
  free: string[],
  path: string,
): void {
  if (expected === ANY || free.includes(path)) {
    assert.notEqual(actual, undefined, `${path} is missing`);
    return;
  }
  if (Array.isArray(expected)) {
    assert.ok(Array.isArray(actual), `${path} is not a list`);
    assert.equal(actual.length, expected.length, `${path}: length`);
    expected.forEach((item, index) =>
      assertCompatible(item, actual[index], free, `${path}[${index}]`)
    );
    return;
  }
  if (typeof expected === "object" && expected !== null) {
    assert.ok(
      typeof actual === "object" && actual !== null,
      `${path} is not an object: ${JSON.stringify(actual)}`,
    );
    for (const [key, value] of Object.entries(expected)) {
      const inner = (actual as Record<string, unknown>)[key];
      assertCompatible(value, inner, free, path ? `${path}.${key}` : key);
    }
    return;
  }
  assert.deepEqual(actual, expected, `${path || "frame"}`);
}

function fill(text: string, vars: Record<string, string>): string {
  return Object.entries(vars).reduce(
    (filled, [name, value]) => filled.replaceAll(`{{${name}}}`, value),
    text,
  );
}

/**
 * Events only our daemon sends (`docs/relay.md`, "Remaining differences"):
 * `daemon.py` has no `run.started`; a hub passes run events on unchanged.
 */
const OURS_ALONE = new Set(["run.started"]);

/**
 * The next daemon frame that is not a ping (pings get their pong) nor an
 * event of {@linkcode OURS_ALONE} (collected in `extra`).
 */
async function nextAnswered(
  side: TestSocket,
  extra: JsonObject[],
): Promise<JsonObject> {
  for (;;) {
    const frame = await side.next();
    const event = frame.event as JsonObject | undefined;
    if (frame.type === "daemon.ping") side.ws.send(PONG);
    else if (OURS_ALONE.has(String(event?.type))) extra.push(event!);
    else return frame;
  }
}

/** Our daemon client and job runner against the scenario's hub frames. */
async function replayOnDaemon(scenario: Scenario): Promise<void> {
  const hub = new ScriptedHub("daemon->hub");
  const controller = new AbortController();
  const record = join(tempDir(), "record.jsonl");
  const agent = fixtureCommand(
    ...scenario.agent_flags ?? [],
    "--record",
    record,
  );
  const runner = createDaemonJobRunner({ fallbackCwd: tempDir() });
  const client = runDaemonClient({
    url: hub.url,
    daemonId: "golden-daemon",
    token: TOKEN,
    runJob: runner.runJob,
    reconnectDelayMs: 20,
    // Only a scenario about unanswered pings pings fast (and then the hold,
    // not the clock, keeps the connection); elsewhere a loaded machine must
    // not turn a late pong into "4000 keepalive ping timeout".
    ...scenario.frames.some((frame) => frame.pings_unanswered)
      ? { pingIntervalMs: 20, pingTimeoutMs: 300 }
      : { pingIntervalMs: 60_000, pingTimeoutMs: 60_000 },
    signal: controller.signal,
  });
  const side = await hub.accept();
  const vars = {
    JOB: "aZ3kT9qLw2Xv7mN1pR5sYb",
    REQ: "",
    CWD: tempDir(),
  };
  let held = 0;
  const extra: JsonObject[] = [];
  try {
    assert.equal((await side.next()).type, "daemon.hello");
    side.ws.send(
      '{"type": "daemon.ready", "daemon_id": "golden-daemon", "protocol": "coding-relay-v1"}',
    );
    for (const [index, frame] of scenario.frames.entries()) {
      const at = `${scenario.scenario} frame ${index}`;
      if (frame.pongs_for_held_pings) {
        for (; held > 0; held--) side.ws.send(PONG);
      } else if (frame.pings_unanswered) {
        for (held = 0; held < frame.pings_unanswered; held++) {
          assert.deepEqual(await side.next(), { type: "daemon.ping" }, at);
        }
      } else if (frame.dir === "hub->daemon") {
        side.ws.send(
          fill(frame.text!.replace('"{{AGENT}}"', JSON.stringify(agent)), {
            ...vars,
            CWD: JSON.stringify(vars.CWD).slice(1, -1),
          }),
        );
      } else {
        const actual = await nextAnswered(side, extra);
        if (actual.type === "mcp.request") vars.REQ = String(actual.request_id);
        const expected = JSON.parse(fill(frame.text!, vars));
        assertCompatible(expected, actual, frame.free ?? [], "");
      }
    }
    // A run whose agent started says so first; this daemon keeps none warm.
    for (const event of extra) {
      assert.deepEqual(
        event.data,
        { agent: "cold", sandbox: "off" },
        "run.started",
      );
    }
    const lines = readRecord(record);
    if (scenario.agent_methods) {
      assert.deepEqual(
        lines.flatMap((line) =>
          line.method && !line.event ? [line.method] : []
        ),
        scenario.agent_methods,
        "what the agent was asked",
      );
    }
    if (scenario.agent_prompt) {
      const prompt = lines.find((line) => line.method === "session/prompt");
      assert.deepEqual(
        (prompt?.params as { prompt: unknown[] }).prompt,
        scenario.agent_prompt,
        "the agent's prompt",
      );
    }
  } finally {
    controller.abort();
    await client;
    await side.close();
    await hub.close();
  }
}

/** Our hub, with a daemon that answers with the scenario's daemon.py frames. */
async function replayOnHub(scenario: Scenario): Promise<void> {
  const { server, manager, close } = await hubWithManager(TOKEN);
  const daemon = await TestSocket.open(server.url);
  try {
    daemon.ws.send(
      `{"type":"daemon.hello","daemon_id":"golden-daemon","protocol":"coding-relay-v1","token":"${TOKEN}","metadata":{"pid":1,"cwd":"/","platform":"posix"}}`,
    );
    assert.equal((await daemon.next()).type, "daemon.ready");
    const { run } = await manager.start({
      input: { text: "hello" },
      config: parseRunConfig(
        scenario.run_config ?? {
          provider: "custom",
          "acp-command": "agent --acp",
          location: "daemon",
          "daemon-id": "golden-daemon",
          workspace: "/workspace/project",
        },
      ),
    });
    const log = new EventLog(run);
    const vars = { JOB: "" };
    for (const frame of scenario.frames) {
      if (frame.dir === "hub->daemon") {
        const actual = await daemon.next();
        if (actual.type === "run.start") vars.JOB = String(actual.job_id);
        if (scenario.run_config) {
          const expected = JSON.parse(fill(frame.text!, vars));
          assertCompatible(expected, actual, frame.free ?? [], "");
        }
      } else {
        daemon.ws.send(fill(frame.text!, vars));
      }
    }
    await run.done;
    // Stored events carry the text daemon.py's frames did (completions whole).
    const events = log.events.map(({ type, data }) => ({ type, data }));
    assertCompatible(scenario.hub_events, events, [], "events");
    for (const event of log.events) {
      assert.ok(event.timestamp! > 1e12, `milliseconds: ${event.timestamp}`);
    }
  } finally {
    await daemon.close();
    await close();
  }
}

for (const scenario of loadScenarios()) {
  if (scenario.sides.includes("daemon")) {
    Deno.test(
      `daemon replays scenario ${scenario.scenario}`,
      () => replayOnDaemon(scenario),
    );
  }
  if (scenario.sides.includes("hub")) {
    Deno.test(
      `hub replays scenario ${scenario.scenario}`,
      () => replayOnHub(scenario),
    );
  }
}
