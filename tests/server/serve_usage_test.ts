/**
 * Token usage through a real `runner serve`: on `run.completed` over SSE,
 * NDJSON and `stream=false`, in the n8n webhook's `stream=false` answer, on a
 * warm second turn, and from a real `runner daemon` through the hub (every
 * relay frame checked against LangBot's model by the tap).
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import type { RunEvent } from "../../lib/events.ts";
import { fixtureCommand, tempDir } from "../helpers.ts";
import { serveWithDaemon } from "../daemon_test_helpers.ts";
import { parseExposition } from "../prometheus_helpers.ts";
import { fixtureTurnTokens, fixtureTurnUsage } from "../usage_helpers.ts";
import {
  agentCommand,
  apiFetch,
  fixtureConfig,
  jsonLines,
  postJson,
  sseEvents,
  terminals,
  withServe,
} from "../serve_test_helpers.ts";

/** The samples of `runner serve`'s `/metrics`, whose token and cost families are counters. */
function exposition(text: string): Map<string, number> {
  const { types, samples } = parseExposition(text);
  assert.equal(types.get("runner_tokens_total"), "counter");
  assert.equal(types.get("runner_cost_total"), "counter");
  return samples;
}

Deno.test("run.completed carries the usage over SSE, NDJSON and stream=false; a warm second turn its own", async () => {
  await withServe(
    { args: ["--allow-custom-commands"] },
    async (serve, dir) => {
      const config = fixtureConfig(join(dir, "ws"), ["--usage", "currencies"]);
      const sse = await sseEvents(
        await postJson(`${serve.url}/v1/runs`, {
          conversation_id: "u",
          input: { text: "one" },
          config,
        }),
      );
      assert.deepEqual(terminals(sse)[0].usage, fixtureTurnUsage(1, "USD"));

      // The warm agent's second turn: the session's turn 2, counted alone.
      const ndjson = await jsonLines(
        await postJson(`${serve.url}/v1/runs`, {
          conversation_id: "u",
          input: { text: "two" },
          config,
        }, { accept: "application/x-ndjson" }),
      ) as unknown as RunEvent[];
      assert.equal(
        ndjson.find((e) => e.type === "run.started")?.data.agent,
        "warm",
      );
      assert.deepEqual(terminals(ndjson)[0].usage, fixtureTurnUsage(2, "EUR"));

      const whole = await postJson(`${serve.url}/v1/runs?stream=false`, {
        input: { text: "three" },
        config: fixtureConfig(join(dir, "ws"), ["--usage", "turn"]),
      });
      const document = await whole.json();
      assert.equal(document.status, "completed");
      assert.deepEqual(document.usage, fixtureTurnUsage(1));
      assert.deepEqual(
        terminals(document.events)[0].usage,
        fixtureTurnUsage(1),
      );

      const silent = await (await postJson(
        `${serve.url}/v1/runs?stream=false`,
        { input: { text: "four" }, config: fixtureConfig(join(dir, "ws")) },
      )).json();
      assert.equal("usage" in silent, false, JSON.stringify(silent));
      assert.equal("usage" in terminals(silent.events)[0], false);

      // Accounting: the conversation adds its runs up, costs per currency.
      const conversation = await (await apiFetch(
        `${serve.url}/v1/conversations/u`,
      )).json();
      assert.equal(conversation.runs, 2);
      assert.deepEqual(conversation.usage, {
        ...fixtureTurnTokens(2),
        runs: 2,
        costs: [
          { amount: 0.25, currency: "EUR" },
          { amount: 0.25, currency: "USD" },
        ],
      });
      const listed = await (await apiFetch(
        `${serve.url}/v1/runs?conversation_id=u`,
      )).json();
      assert.deepEqual(
        listed.runs.map((run: { usage: unknown }) => run.usage),
        [fixtureTurnUsage(2, "EUR"), fixtureTurnUsage(1, "USD")],
      );
      const other = await (await apiFetch(`${serve.url}/v1/runs?limit=10`))
        .json();
      assert.ok(
        other.runs.some((run: { usage: unknown }) => run.usage === null),
        "a run without usage lists null",
      );

      // /metrics counts every run's tokens by provider, model and kind.
      const metrics = exposition(
        await (await apiFetch(`${serve.url}/metrics`)).text(),
      );
      const tokens = (kind: string) =>
        metrics.get(
          `runner_tokens_total{provider="custom",model="unknown",kind="${kind}"}`,
        );
      assert.equal(tokens("prompt"), 300);
      assert.equal(tokens("completion"), 60);
      assert.equal(tokens("cached_read"), 90);
      assert.equal(tokens("cached_write"), 15);
      assert.equal(tokens("thought"), 21);
      assert.equal(metrics.get('runner_cost_total{currency="USD"}'), 0.5);
      assert.equal(metrics.get('runner_cost_total{currency="EUR"}'), 0.25);
    },
  );
});

Deno.test("the n8n webhook's stream=false answer carries the run's usage", async () => {
  const dir = tempDir();
  await withServe({
    args: [
      "--provider",
      "custom",
      "--acp-command",
      agentCommand(["--usage", "turn"]),
      "--workspace",
      join(dir, "ws"),
    ],
  }, async (serve) => {
    const answer = await (await postJson(
      `${serve.url}/v1/webhooks/n8n?stream=false`,
      { chatInput: "hello", session_id: "n8n-usage" },
    )).json();
    assert.equal(answer.response, "echo: hello (turn 1)");
    assert.deepEqual(answer.usage, fixtureTurnUsage(1));
  });
  await Deno.remove(dir, { recursive: true });
});

Deno.test("a daemon run's usage crosses the relay in LangBot's model and reaches the caller whole; a steered daemon run adds its turns", async () => {
  const { serve, daemon } = await serveWithDaemon("usage-laptop");
  try {
    await daemon.connected;
    const config = (flags: string[]) => ({
      provider: "custom",
      location: "daemon",
      "daemon-id": "usage-laptop",
      workspace: tempDir(),
      "acp-command": fixtureCommand("--usage", "turn", ...flags),
    });
    const events = await sseEvents(
      await postJson(`${serve.url}/v1/runs`, {
        input: { text: "through the daemon" },
        config: config([]),
      }),
    );
    assert.deepEqual(terminals(events)[0].usage, fixtureTurnUsage(1));

    // A follow-up while the first turn waits at the gate: two jobs, one run.
    const gate = join(tempDir(), "gate");
    await new Deno.Command("mkfifo", { args: [gate] }).output();
    const first = postJson(`${serve.url}/v1/runs`, {
      conversation_id: "d-steer",
      input: { text: "first" },
      config: config(["--gate-fifo", gate]),
    });
    const response = await first;
    const reader = sseEvents(response);
    // The daemon's agent opens the gate once the first turn's text is out.
    const release = async () => {
      const file = await Deno.open(gate, { write: true });
      await file.write(new TextEncoder().encode("go\n"));
      file.close();
    };
    const steered = await (await postJson(`${serve.url}/v1/runs`, {
      conversation_id: "d-steer",
      input: { text: "second" },
      config: config(["--gate-fifo", gate]),
    })).json();
    assert.equal(steered.steered, true, JSON.stringify(steered));
    await release();
    await release();
    const steeredEvents = await reader;
    const ending = terminals(steeredEvents)[0];
    assert.equal(ending.type, "run.completed", JSON.stringify(ending));
    const twoTurns = fixtureTurnTokens(2);
    // The second job is the same (warm) agent's turn 2: its window is last,
    // and the session's running cost after it is what the run cost.
    assert.deepEqual(ending.usage, {
      ...twoTurns,
      used: 2000,
      size: 200000,
      cost: { amount: 0.5, currency: "USD" },
    });
    const run = await (await apiFetch(
      `${serve.url}/v1/runs/${ending.run_id}`,
    )).json();
    assert.equal(run.status, "completed");
  } finally {
    await daemon.stop();
    await serve.stop();
  }
});

Deno.test("a kept session's running cost: each run of the conversation costs what it added (warm and after a cold load), and the totals are the agent's last figure", async () => {
  await withServe(
    { args: ["--allow-custom-commands", "--allow-env-names", "RUN_TAG"] },
    async (serve, dir) => {
      // The agent reports the session's running cost: 0.25 more each turn.
      const config = fixtureConfig(join(dir, "ws"), [
        "--usage",
        "turn",
        "--load-session",
        "--state-dir",
        join(dir, "agent-state"),
      ]);
      const turn = async (text: string, runConfig: Record<string, unknown>) => {
        const response = await postJson(`${serve.url}/v1/runs`, {
          conversation_id: "kept",
          input: { text },
          config: runConfig,
        });
        assert.equal(response.status, 200, await response.clone().text());
        const events = await sseEvents(response);
        const ending = terminals(events)[0];
        assert.equal(ending?.type, "run.completed", JSON.stringify(events));
        const started = events.find((e) => e.type === "run.started");
        const answer = events.find((e) => e.type === "message.completed")
          ?.data.message as { content?: string } | undefined;
        return { ending, agent: started?.data.agent, answer: answer?.content };
      };
      const first = await turn("one", config);
      assert.deepEqual(first.ending.usage?.cost, {
        amount: 0.25,
        currency: "USD",
      });
      const warm = await turn("two", config);
      assert.equal(warm.agent, "warm");
      assert.deepEqual(warm.ending.usage?.cost, {
        amount: 0.25,
        currency: "USD",
      });
      // Another environment: a cold agent that loads the stored session.
      const cold = await turn("three", {
        ...config,
        "env-json": { RUN_TAG: "cold" },
      });
      assert.equal(cold.agent, "cold");
      assert.equal(cold.answer, "echo: three (turn 3)", "the session loaded");
      assert.deepEqual(cold.ending.usage?.cost, {
        amount: 0.25,
        currency: "USD",
      });

      // The agent's last running total (turn 3: 0.75) is what the
      // conversation, its runs and /metrics add up to.
      const conversation = await (await apiFetch(
        `${serve.url}/v1/conversations/kept`,
      )).json();
      assert.deepEqual(conversation.usage.costs, [
        { amount: 0.75, currency: "USD" },
      ]);
      const listed = await (await apiFetch(
        `${serve.url}/v1/runs?conversation_id=kept`,
      )).json();
      assert.deepEqual(
        listed.runs.map((run: { usage: { cost: unknown } }) => run.usage.cost),
        [0.25, 0.25, 0.25].map((amount) => ({ amount, currency: "USD" })),
      );
      const metrics = exposition(
        await (await apiFetch(`${serve.url}/metrics`)).text(),
      );
      assert.equal(metrics.get('runner_cost_total{currency="USD"}'), 0.75);
      // Tokens are per turn (ACP's PromptResponse.usage): three turns' worth.
      assert.equal(conversation.usage.prompt_tokens, 300);
    },
  );
});
