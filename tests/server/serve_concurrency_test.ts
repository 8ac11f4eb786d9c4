/**
 * Fifty concurrent runs on a real `runner serve` each get their own answer,
 * and a fifty-first over `--max-concurrent-runs 50` is refused with 429.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import {
  apiFetch,
  deltaText,
  fixtureConfig,
  makeFifo,
  openGate,
  postJson,
  streamUntil,
  terminals,
  withServe,
} from "../serve_test_helpers.ts";

const RUNS = 50;

Deno.test("50 concurrent runs answer with their own text; run 51 gets 429", async () => {
  await withServe({
    args: ["--allow-custom-commands", "--max-concurrent-runs", String(RUNS)],
  }, async (serve, dir) => {
    const gates = Array.from(
      { length: RUNS },
      (_, index) => join(dir, `gate-${index}`),
    );
    await Promise.all(gates.map(makeFifo));
    const streams = await Promise.all(gates.map(async (gate, index) => {
      const response = await postJson(`${serve.url}/v1/runs`, {
        input: { text: `question ${index}` },
        config: {
          ...fixtureConfig(join(dir, "ws"), [
            "--text",
            `answer number ${index}`,
            "--gate-fifo",
            gate,
          ]),
          "startup-timeout": 300,
        },
      });
      assert.equal(response.status, 200);
      const { events, messages } = await streamUntil(response, "message.delta");
      return { events, messages };
    }));

    const refused = await postJson(`${serve.url}/v1/runs`, {
      input: { text: "one too many" },
      config: fixtureConfig(join(dir, "ws")),
    });
    assert.equal(refused.status, 429);
    assert.ok(Number(refused.headers.get("retry-after")) > 0);
    const body = await refused.json();
    assert.equal(body.error.code, "http.too_many_runs");
    assert.equal(body.error.retryable, true);

    await Promise.all(gates.map(openGate));
    await Promise.all(streams.map(async ({ events, messages }, index) => {
      for await (const message of messages) {
        events.push(JSON.parse(message.data));
      }
      assert.equal(deltaText(events), `answer number ${index}`);
      assert.equal(terminals(events).length, 1);
      assert.equal(events.at(-1)!.type, "run.completed");
    }));

    const metrics = await (await apiFetch(`${serve.url}/metrics`)).text();
    assert.match(
      metrics,
      new RegExp(
        `runner_runs_finished_total\\{status="completed",provider="custom",location="local"\\} ${RUNS}`,
      ),
    );
    assert.match(metrics, /runner_runs_active 0/);
    assert.match(metrics, /runner_agent_processes_alive 0/);
    assert.match(
      metrics,
      new RegExp(
        `runner_time_to_first_event_seconds_count\\{provider="custom",location="local"\\} ${RUNS}`,
      ),
    );
  });
});
