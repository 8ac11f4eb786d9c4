/**
 * Warm agents are never reused unsafely, through a real `runner serve`: a
 * cancelled run's agent, an agent that died while idle, an agent whose
 * session moved to another target, and an agent that printed garbage all
 * lead to a cold start; a turn's late output never reaches the next run.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { isAlive } from "../helpers.ts";
import {
  fixtureConfig,
  gateIn,
  openGate,
  postJson,
  streamUntil,
  terminals,
  withServe,
} from "../serve_test_helpers.ts";
import {
  answers,
  conversation,
  ending,
  listAgents,
  loadableSessions,
  metric,
  recordByProcess,
  recordedFixture,
  sendMessage,
} from "../warm_helpers.ts";

const SERVE = ["--allow-custom-commands"];

Deno.test("a cancelled run's agent is torn down, never reused", async () => {
  await withServe({ args: SERVE }, async (serve, dir) => {
    const gate = await gateIn(dir);
    const { record, config } = recordedFixture(dir, ["--gate-fifo", gate]);
    const message = conversation(serve, config);
    const gated = message("one");
    await openGate(gate);
    assert.equal((await gated).agent, "cold");

    const response = await postJson(`${serve.url}/v1/runs`, {
      conversation_id: "chat",
      input: { text: "two" },
      config,
    });
    const { events, messages } = await streamUntil(response, "message.delta");
    assert.equal(
      events.find((event) => event.type === "run.started")?.data.agent,
      "warm",
    );
    const runId = response.headers.get("x-run-id")!;
    await (await postJson(`${serve.url}/v1/runs/${runId}/cancel`, {})).body
      ?.cancel();
    for await (const message of messages) events.push(JSON.parse(message.data));
    assert.equal(terminals(events)[0].data.code, "run.cancelled");
    const [agent] = recordByProcess(record);
    assert.ok(!isAlive(agent.pid), "the cancelled run's agent survived");
    assert.deepEqual(await listAgents(serve), []);

    const third = message("three");
    await openGate(gate);
    assert.equal((await third).agent, "cold");
    assert.equal(recordByProcess(record).length, 2);
  });
});

Deno.test("an agent killed while idle is dropped; the next message starts cold and completes", async () => {
  await withServe({ args: SERVE }, async (serve, dir) => {
    const { record, config } = recordedFixture(dir, loadableSessions(dir));
    const message = conversation(serve, config);
    await message("one");
    const [agent] = recordByProcess(record);
    Deno.kill(agent.pid, "SIGKILL");
    await serve.waitForLog((entry) =>
      entry.msg === "warm agent exited while idle"
    );
    const second = await message("two");
    assert.equal(second.agent, "cold");
    assert.equal(ending(second).type, "run.completed");
    assert.deepEqual(answers(second), ["echo: two (turn 2)"]);
    assert.equal(
      await metric(serve, 'runner_warm_agent_evictions_total{reason="exited"}'),
      1,
    );
  });
});

Deno.test("a changed config starts cold; the agent it left behind is stale and is not reused", async () => {
  // fs-read is the operator's to turn on; the caller turning it off is the change.
  await withServe(
    { args: [...SERVE, "--fs-read", "true"] },
    async (serve, dir) => {
      const { record, config } = recordedFixture(dir, loadableSessions(dir));
      const message = (text: string, extra: Record<string, unknown> = {}) =>
        sendMessage(serve, {
          conversation_id: "chat",
          text,
          config: { ...config, ...extra },
        });
      await message("one");
      const [first] = recordByProcess(record);
      const changed = await message("two", { "fs-read": false });
      assert.equal(changed.agent, "cold");
      assert.deepEqual(answers(changed), ["echo: two (turn 2)"]);
      // The first agent missed turn 2 of the session it holds: stopped, not reused.
      assert.equal((await listAgents(serve)).length, 1);
      await serve.waitForLog((entry) => entry.msg === "warm agent gone");
      assert.ok(!isAlive(first.pid), "the stale agent survived");
      const back = await message("three");
      assert.equal(back.agent, "cold");
      assert.deepEqual(answers(back), ["echo: three (turn 3)"]);
      assert.equal(recordByProcess(record).length, 3);
      assert.equal(
        await metric(
          serve,
          'runner_warm_agent_evictions_total{reason="stale"}',
        ),
        2,
      );
    },
  );
});

Deno.test("a rotated env-json value starts a new agent: the old key's agent is not reused", async () => {
  await withServe({
    args: [...SERVE, "--allow-env-names", "PROVIDER_API_KEY"],
  }, async (serve, dir) => {
    const { record, config } = recordedFixture(dir, loadableSessions(dir));
    const message = (text: string, key: string) =>
      sendMessage(serve, {
        conversation_id: "chat",
        text,
        config: { ...config, "env-json": { PROVIDER_API_KEY: key } },
      });
    assert.equal((await message("one", "key-1")).agent, "cold");
    assert.equal((await message("two", "key-1")).agent, "warm", "same key");
    const rotated = await message("three", "key-2");
    assert.equal(rotated.agent, "cold", "the agent of the old key was reused");
    assert.deepEqual(answers(rotated), ["echo: three (turn 3)"]);
    assert.equal(recordByProcess(record).length, 2);
    assert.equal((await message("four", "key-2")).agent, "warm");
  });
});

Deno.test("late updates of a turn that arrive while the agent is idle never reach the next run", async () => {
  await withServe({ args: SERVE }, async (serve, dir) => {
    const config = {
      ...fixtureConfig(join(dir, "ws"), [
        "--late-updates",
        "3",
        "--late-update-delay-ms",
        "300",
      ]),
      "late-update-ms": 20,
    };
    const message = conversation(serve, config);
    const first = await message("one");
    assert.deepEqual(answers(first), ["echo: one (turn 1)"]);
    // All three late chunks of turn 1 reach the agent's idle side first.
    const discarded = new Set<unknown>();
    while (discarded.size < 3) {
      discarded.add(
        await serve.waitForLog((entry) =>
          entry.msg === "agent output while idle discarded" &&
          entry.kind === "agent_message_chunk" && !discarded.has(entry)
        ),
      );
    }
    const second = await message("two");
    assert.equal(second.agent, "warm");
    assert.deepEqual(answers(second), ["echo: two (turn 2)"]);
    assert.ok(
      !JSON.stringify(second.events).includes("late-"),
      "a late update of turn 1 reached run 2",
    );
  });
});

Deno.test("an agent that printed garbage on stdout during its turn is not kept", async () => {
  await withServe({ args: SERVE }, async (serve, dir) => {
    const { record, config } = recordedFixture(dir, ["--stdout-noise"]);
    const message = conversation(serve, config);
    const first = await message("one");
    assert.equal(ending(first).type, "run.completed");
    assert.ok(!isAlive(recordByProcess(record)[0].pid));
    assert.deepEqual(await listAgents(serve), []);
    assert.equal((await message("two")).agent, "cold");
  });
});
