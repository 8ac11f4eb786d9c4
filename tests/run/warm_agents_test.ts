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
import { assertAgentGone, isAlive } from "../helpers.ts";
import {
  apiFetch,
  assertStatus,
  fixtureConfig,
  type ServeProcess,
  startServe,
  tempDir,
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
import { pathWithoutBwrap } from "../sandbox_helpers.ts";

const SERVE = ["--allow-custom-commands"];

Deno.test("the second message goes straight to session/prompt on the same agent, listed by /v1/agents until DELETE stops it", async () => {
  await withServe({ args: SERVE }, async (serve, dir) => {
    const { record, config } = recordedFixture(dir, loadableSessions(dir));
    const message = conversation(serve, config);

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
    const stopped = await apiFetch(`${serve.url}/v1/agents/${agent.agent_id}`, {
      method: "DELETE",
    });
    assert.deepEqual(await stopped.json(), {
      agent_id: agent.agent_id,
      stopped: true,
    });
    assert.ok(!isAlive(process.pid), "DELETE stopped the agent");
    assert.deepEqual(await listAgents(serve), []);
    const missing = await apiFetch(`${serve.url}/v1/agents/${agent.agent_id}`, {
      method: "DELETE",
    });
    await assertStatus(missing, 404);

    const third = await message("three");
    assert.equal(third.agent, "cold");
    assert.deepEqual(answers(third), ["echo: three (turn 3)"]);
    assert.deepEqual(recordByProcess(record)[1].methods, [
      "initialize",
      "session/load",
      "session/prompt",
    ]);

    // Forgetting the conversation's sessions stops its warm agent too.
    const forgotten = await apiFetch(`${serve.url}/v1/conversations/chat`, {
      method: "DELETE",
    });
    assert.equal((await forgotten.json()).deleted_sessions, 1);
    assert.deepEqual(await listAgents(serve), []);
    assert.ok(!isAlive(recordByProcess(record)[1].pid));
  });
});

Deno.test("with a 1 s initialize and a 1 s load, the second message's first chunk comes at least 10× sooner warm than cold", async () => {
  await withServe({ args: SERVE }, async (serve, dir) => {
    const config = fixtureConfig(join(dir, "ws"), [
      ...loadableSessions(dir),
      "--initialize-delay-ms",
      "1000",
      "--load-delay-ms",
      "1000",
    ]);
    const message = (conversationId: string, text: string) =>
      conversation(serve, config, conversationId)(text);

    await message("kept", "one");
    const warm = await message("kept", "two");
    assert.equal(warm.agent, "warm");
    assert.deepEqual(answers(warm), ["echo: two (turn 2)"]);

    await message("dropped", "one");
    const idle = (await listAgents(serve)).find((agent) =>
      agent.conversation_id === "dropped"
    )!;
    await (await apiFetch(`${serve.url}/v1/agents/${idle.agent_id}`, {
      method: "DELETE",
    })).body?.cancel();
    const cold = await message("dropped", "two");
    assert.equal(cold.agent, "cold");
    assert.deepEqual(answers(cold), ["echo: two (turn 2)"]);

    assert.ok(
      cold.firstChunkMs >= 10 * warm.firstChunkMs,
      `first chunk warm ${warm.firstChunkMs.toFixed(0)} ms, cold ${
        cold.firstChunkMs.toFixed(0)
      } ms`,
    );
  });
});

Deno.test("agent-idle-timeout stops an idle agent: gone from the process table and the list", async () => {
  await withServe(
    { args: [...SERVE, "--agent-idle-timeout", "0.3"] },
    async (serve, dir) => {
      const { record, config } = recordedFixture(dir);
      const message = conversation(serve, config);
      const first = await message("one");
      assert.equal(ending(first).type, "run.completed");
      const [agent] = recordByProcess(record);
      await serve.waitForLog((entry) =>
        entry.msg === "warm agent stopped" && entry.reason === "idle_timeout"
      );
      await serve.waitForLog((entry) => entry.msg === "warm agent gone");
      assert.ok(!isAlive(agent.pid), `idle agent ${agent.pid} still alive`);
      assert.deepEqual(await listAgents(serve), []);
      assert.equal(
        await metric(
          serve,
          'runner_warm_agent_evictions_total{reason="idle_timeout"}',
        ),
        1,
      );
      assert.equal((await message("two")).agent, "cold");
    },
  );
});

Deno.test("at max-warm-agents the least recently used agent is stopped first", async () => {
  await withServe(
    { args: [...SERVE, "--max-warm-agents", "2"] },
    async (serve, dir) => {
      const pids: Record<string, number> = {};
      const configs: Record<string, unknown> = {};
      for (const chat of ["a", "b", "c"]) {
        const record = join(dir, `${chat}.jsonl`);
        configs[chat] = fixtureConfig(join(dir, "ws"), ["--record", record]);
        await sendMessage(serve, {
          conversation_id: chat,
          text: "hi",
          config: configs[chat],
        });
        pids[chat] = recordByProcess(record)[0].pid;
        // "a" is used again before "c" arrives, so "b" is the least recent.
        if (chat === "b") {
          const again = await sendMessage(serve, {
            conversation_id: "a",
            text: "again",
            config: configs.a,
          });
          assert.equal(again.agent, "warm");
        }
      }
      await serve.waitForLog((entry) => entry.msg === "warm agent gone");
      assert.ok(!isAlive(pids.b), "the least recently used agent survived");
      assert.ok(isAlive(pids.a) && isAlive(pids.c));
      assert.deepEqual(
        (await listAgents(serve)).map((agent) => agent.conversation_id),
        ["a", "c"],
      );
      assert.equal(
        await metric(serve, 'runner_warm_agent_evictions_total{reason="lru"}'),
        1,
      );
      const b = await sendMessage(serve, {
        conversation_id: "b",
        text: "back",
        config: configs.b,
      });
      assert.equal(b.agent, "cold");
    },
  );
});

Deno.test("SIGTERM of the runner stops its warm agents; so does a restart after SIGKILL (without bubblewrap)", async () => {
  const dir = await tempDir();
  const dataDir = join(dir, "data");
  // With bwrap an agent's PID namespace dies with the runner: nothing is left
  // for the restart to reap (tests/security/outlive_test.ts).
  const env = { PATH: pathWithoutBwrap() };
  // A grandchild that ignores SIGTERM outlives the agent's own exit on stdin
  // EOF: only a teardown of the whole group (or the reaper) ends it.
  const configWith = (pidFile: string) =>
    fixtureConfig(join(dir, "ws"), ["--grandchild", "--pid-file", pidFile]);
  const pidsOf = (pidFile: string): number[] =>
    Object.values(JSON.parse(Deno.readTextFileSync(pidFile)));
  // Starts a warm agent of `conversation`; returns its pid file.
  const warmAgent = async (serve: ServeProcess, conversation: string) => {
    const pidFile = join(dir, `${conversation}.json`);
    await sendMessage(serve, {
      conversation_id: conversation,
      text: "hi",
      config: configWith(pidFile),
    });
    return pidFile;
  };
  try {
    const graceful = await startServe({ dataDir, args: SERVE, env });
    const first = await warmAgent(graceful, "a");
    assert.ok(pidsOf(first).every(isAlive), "the warm agent idles");
    assert.equal((await graceful.stop("SIGTERM")).code, 0);
    assertAgentGone(first);

    const crashed = await startServe({ dataDir, args: SERVE, env });
    const second = await warmAgent(crashed, "b");
    await crashed.stop("SIGKILL");
    assert.ok(
      pidsOf(second).some(isAlive),
      "expected the agent's grandchild to outlive kill -9",
    );
    const restarted = await startServe({ dataDir, args: SERVE, env });
    try {
      assertAgentGone(second);
    } finally {
      await restarted.stop("SIGTERM");
    }
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
});
