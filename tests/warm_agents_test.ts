/**
 * Warm agents through a real `runner serve`: the second message of a
 * conversation reuses the agent process and its session (only
 * `session/prompt`), the pool is visible and bounded, and nothing unsafe is
 * ever reused. The fixture's record file shows what each process received.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { isAlive } from "./helpers.ts";
import { fixtureConfig, withServe } from "./serve_test_helpers.ts";
import {
  answers,
  ending,
  listAgents,
  metric,
  recordByProcess,
  sendMessage,
} from "./warm_helpers.ts";

const SERVE = ["--allow-custom-commands"];

Deno.test("the second message goes straight to session/prompt on the same agent, listed by /v1/agents until DELETE stops it", async () => {
  await withServe({ args: SERVE }, async (serve, dir) => {
    const record = join(dir, "record.jsonl");
    const config = fixtureConfig(join(dir, "ws"), [
      "--load-session",
      "--state-dir",
      join(dir, "sessions"),
      "--record",
      record,
    ]);
    const message = (text: string) =>
      sendMessage(serve, { conversation_id: "chat", text, config });

    const first = await message("one");
    assert.equal(first.agent, "cold");
    assert.deepEqual(answers(first), ["echo: one (turn 1)"]);
    const [agent] = await listAgents(serve);
    assert.equal(agent.conversation_id, "chat");
    assert.equal(agent.provider, "custom");
    assert.ok(Date.parse(agent.idle_since) <= Date.now());
    const [process] = recordByProcess(record);
    assert.ok(isAlive(process.pid), "the idle agent is alive");

    const second = await message("two");
    assert.equal(second.agent, "warm");
    assert.deepEqual(answers(second), ["echo: two (turn 2)"]);
    assert.equal(ending(second).type, "run.completed");
    const processes = recordByProcess(record);
    assert.equal(processes.length, 1, "no second agent process");
    assert.deepEqual(processes[0].methods, [
      "initialize",
      "session/new",
      "session/prompt",
      "session/prompt",
    ]);
    assert.equal(await metric(serve, "runner_warm_agent_hits_total"), 1);
    assert.equal(await metric(serve, "runner_warm_agent_misses_total"), 0);
    assert.equal(await metric(serve, "runner_warm_agents"), 1);

    const [again] = await listAgents(serve);
    assert.equal(again.agent_id, agent.agent_id, "one agent, one id");
    const stopped = await fetch(`${serve.url}/v1/agents/${agent.agent_id}`, {
      method: "DELETE",
    });
    assert.deepEqual(await stopped.json(), {
      agent_id: agent.agent_id,
      stopped: true,
    });
    assert.ok(!isAlive(process.pid), "DELETE stopped the agent");
    assert.deepEqual(await listAgents(serve), []);
    const missing = await fetch(`${serve.url}/v1/agents/${agent.agent_id}`, {
      method: "DELETE",
    });
    assert.equal(missing.status, 404);
    await missing.body?.cancel();

    const third = await message("three");
    assert.equal(third.agent, "cold");
    assert.deepEqual(answers(third), ["echo: three (turn 3)"]);
    assert.deepEqual(recordByProcess(record)[1].methods, [
      "initialize",
      "session/load",
      "session/prompt",
    ]);
  });
});
