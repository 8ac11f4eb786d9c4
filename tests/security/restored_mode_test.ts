/**
 * The restored mode: an agent keeps a session's mode with the session, so a
 * run that restores it (`session/load`, `session/resume`) under a stricter
 * operator would get the mode an earlier, looser run set. The operator's
 * pinned mode is set again on the restored session; a mode the operator no
 * longer lets callers choose, which the run does not replace, keeps the
 * session from being restored (a new one starts, `session.reset`). Through
 * `runner serve` and a hub's `run.start` to a daemon. Issue 35, break 6.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createDaemonJobRunner } from "../../lib/daemon/job.ts";
import { daemonFloorFromFlags } from "../../lib/daemon/job_floor.ts";
import type { RunEvent } from "../../lib/events.ts";
import type { JsonObject } from "../../lib/relay.ts";
import { agentCommand, tempDir } from "../helpers.ts";
import { hubJob } from "../daemon_test_helpers.ts";
import {
  postJson,
  type ServeProcess,
  sseEvents,
  startServe,
} from "../serve_test_helpers.ts";

const TOKEN = "restored-mode-token-" + crypto.randomUUID();
const AUTH = { authorization: `Bearer ${TOKEN}` };

/** The fixture agent that keeps a session's values with it, restored by `session`. */
function keepingAgent(session: "--load-session" | "--resume"): string {
  return agentCommand([
    ...["--session-config", "both", session, "--keep-session-values"],
    ...["--state-dir", tempDir("agent-state-")],
  ]);
}

/** One conversation's runs, each on a fresh `runner serve` over one data dir. */
function conversation(acp: string) {
  const dataDir = tempDir("data-");
  const workspace = tempDir("ws-");
  return async (
    operator: string[],
    config: Record<string, unknown> = {},
  ): Promise<RunEvent[]> => {
    const serve: ServeProcess = await startServe({
      dataDir,
      args: [
        ...["--api-token", TOKEN, "--provider", "custom"],
        ...["--workspace", workspace, "--acp-command", acp],
        ...operator,
      ],
    });
    try {
      const response = await postJson(`${serve.url}/v1/runs`, {
        input: { text: "hi" },
        conversation_id: "c-restored",
        config,
      }, AUTH);
      const events = await sseEvents(response);
      assert.equal(
        events.at(-1)?.type,
        "run.completed",
        JSON.stringify(events),
      );
      return events;
    } finally {
      await serve.stop();
    }
  };
}

/** The mode the agent itself says it is in, in its reply. */
function agentMode(events: RunEvent[]): string | undefined {
  return JSON.stringify(events).match(/config: mode=(\w+)/)?.[1];
}

function configured(events: RunEvent[]): Record<string, unknown> {
  const found = events.find((event) => event.type === "session.configured");
  assert.ok(found, JSON.stringify(events));
  return found.data;
}

function reset(events: RunEvent[]): Record<string, unknown> | undefined {
  return events.find((event) => event.type === "session.reset")?.data;
}

for (const session of ["--load-session", "--resume"] as const) {
  Deno.test(`the operator's pinned mode is set again on a session restored with ${session}`, async () => {
    const run = conversation(keepingAgent(session));
    const loose = await run([], { mode: "acceptEdits" });
    assert.equal(agentMode(loose), "acceptEdits");
    const pinned = await run(["--mode", "plan"]);
    const wire = JSON.stringify(pinned);
    assert.equal(reset(pinned), undefined, "the session was restored");
    assert.match(wire, /\(turn 2\)/, "the session was restored");
    assert.equal(configured(pinned).mode, "plan", wire);
    assert.equal(agentMode(pinned), "plan", wire);
  });

  Deno.test(`a mode the operator no longer lets callers choose does not come back with ${session}`, async () => {
    const run = conversation(keepingAgent(session));
    const loose = await run([], {
      mode: "acceptEdits",
      "session-config-json": { effort: "high" },
    });
    assert.equal(agentMode(loose), "acceptEdits");
    // The operator now asks for permission and pins no mode: a caller may
    // choose none, and the run sets none of its own.
    const strict = ["--permission-decision", "ask"];
    const second = await run(strict);
    const wire = JSON.stringify(second);
    assert.notEqual(agentMode(second), "acceptEdits", wire);
    assert.notEqual(configured(second).mode, "acceptEdits", wire);
    assert.doesNotMatch(wire, /effort=high/);
    assert.match(String(reset(second)?.reason), /mode/, wire);
    // The new session is the conversation's now, and continues as usual.
    const third = await run(strict);
    assert.equal(reset(third), undefined, JSON.stringify(third));
    assert.match(JSON.stringify(third), /\(turn 2\)/);
    assert.notEqual(agentMode(third), "acceptEdits");
  });
}

Deno.test("a daemon does not restore a session whose remembered mode it does not let the hub choose", async () => {
  const acp = keepingAgent("--load-session");
  const workspace = tempDir("daemon-ws-");
  const job = async (
    floor: Record<string, unknown>,
    config: JsonObject,
  ): Promise<JsonObject[]> => {
    const runner = createDaemonJobRunner({
      environment: {
        HOME: tempDir("daemon-home-"),
        PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
      },
      floor: daemonFloorFromFlags(floor, tempDir("daemon-data-")),
    });
    const events: JsonObject[] = [];
    const id = crypto.randomUUID();
    await runner.runJob(hubJob(id, {
      run_id: id,
      prompt_text: "hi",
      config: {
        provider: "custom",
        acp_command: acp,
        cwd: workspace,
        langbot_assets_enabled: false,
        ...config,
      },
    }, (event) => events.push(event)));
    assert.equal(events.at(-1)?.type, "run.completed", JSON.stringify(events));
    return events;
  };
  const first = await job({}, { mode: "acceptEdits" });
  const sessionId = first.map((event) => event.data as JsonObject)
    .find((data) => data?.key === "external.acp_session_id")?.value;
  assert.ok(typeof sessionId === "string", JSON.stringify(first));
  const remembered = {
    stored_session_id: sessionId,
    stored_session_config: { mode: "acceptEdits" },
  };
  // The daemon lets the hub choose only plan, and the hub sets none.
  const second = await job({ "caller-modes": "plan" }, remembered);
  const wire = JSON.stringify(second);
  assert.doesNotMatch(wire, /config: mode=acceptEdits/);
  assert.ok(second.some((event) => event.type === "session.reset"), wire);
  // A job that sets the mode itself restores the session, in its mode.
  const third = await job({ "caller-modes": "plan" }, {
    ...remembered,
    mode: "plan",
  });
  const thirdWire = JSON.stringify(third);
  assert.ok(!third.some((event) => event.type === "session.reset"), thirdWire);
  assert.match(thirdWire, /config: mode=plan/);
  assert.match(thirdWire, /\(turn 2\)/);
});
