/**
 * Requests a real `runner serve` refuses, each with its status and code and
 * without starting or storing anything: malformed bodies
 * (`http.bad_request`), follow-ups past the steering limit
 * (`run.steering_queue_full`, 429), and forgetting the sessions of a
 * conversation whose run is still active (409).
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { STEERING_QUEUE_LIMIT } from "../../lib/run/engine.ts";
import {
  apiFetch,
  fixtureConfig,
  gateIn,
  openGate,
  postJson,
  type ServeProcess,
  streamUntil,
  withServe,
} from "../serve_test_helpers.ts";

/** Callers of these tests choose the fixture agent as their command. */
const CUSTOM = ["--allow-custom-commands"];

async function errorOf(
  response: Response,
): Promise<[number, string, boolean]> {
  const body = await response.json();
  return [response.status, body.error.code, body.error.retryable];
}

Deno.test("malformed run requests get 400 http.bad_request and store nothing", async () => {
  await withServe({ args: [] }, async (serve, dir) => {
    const post = (body: string) =>
      apiFetch(`${serve.url}/v1/runs`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body,
      });
    const cases: Array<[string, RegExp]> = [
      ["{not json", /not valid JSON/],
      ["[1, 2]", /must be a JSON object/],
      ['{"input": 42}', /input must be an object/],
      ['{"input": {"text": 7}}', /input\.text must be a string/],
      ['{"input": {"text": "x", "attachments": {}}}', /must be an array/],
      ['{"input": "x", "stream": "maybe"}', /stream must be true or false/],
      ['{"input": "x", "conversation_id": "no spaces"}', /conversation_id/],
    ];
    for (const [body, message] of cases) {
      const response = await post(body);
      const payload = await response.json();
      assert.deepEqual(
        [response.status, payload.error.code, payload.error.retryable],
        [400, "http.bad_request", false],
        body,
      );
      assert.match(payload.error.message, message, body);
    }
    const input = await apiFetch(`${serve.url}/v1/runs/nope/input`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{broken",
    });
    assert.deepEqual(await errorOf(input), [400, "http.bad_request", false]);
    const runs = await (await apiFetch(`${serve.url}/v1/runs`)).json();
    assert.deepEqual(runs.runs, []);
    assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), ["data"]);
  });
});

/** Where {@linkcode gatedRun} runs and how far it reads. */
interface GatedRun {
  conversation: string;
  /** More fixture flags. */
  fixtureFlags?: string[];
  /** The event the stream is read up to. */
  until: string;
}

/**
 * POSTs a run of `conversation` whose fixture agent waits at a gate in `dir`
 * and reads its stream up to `until`; returns the run's config, gate, id and
 * open stream.
 */
async function gatedRun(serve: ServeProcess, dir: string, run: GatedRun) {
  const gate = await gateIn(dir);
  const config = fixtureConfig(join(dir, "ws"), [
    ...["--gate-fifo", gate],
    ...run.fixtureFlags ?? [],
  ]);
  const response = await postJson(`${serve.url}/v1/runs`, {
    conversation_id: run.conversation,
    input: { text: "first" },
    config,
  });
  const runId = response.headers.get("x-run-id")!;
  return { config, gate, runId, ...await streamUntil(response, run.until) };
}

Deno.test(`past ${STEERING_QUEUE_LIMIT} queued follow-ups a run refuses more with 429 run.steering_queue_full`, async () => {
  await withServe({ args: CUSTOM }, async (serve, dir) => {
    const { config, runId, events, messages } = await gatedRun(serve, dir, {
      conversation: "full",
      fixtureFlags: ["--text", "held"],
      until: "message.delta",
    });
    for (let i = 0; i < STEERING_QUEUE_LIMIT; i++) {
      const queued = await postJson(`${serve.url}/v1/runs/${runId}/input`, {
        text: `q${i}`,
      });
      assert.equal(queued.status, 202, `follow-up ${i}`);
      await queued.body?.cancel();
    }
    const viaInput = await postJson(`${serve.url}/v1/runs/${runId}/input`, {
      text: "one too many",
    });
    assert.deepEqual(await errorOf(viaInput), [
      429,
      "run.steering_queue_full",
      true,
    ]);
    const viaRuns = await postJson(`${serve.url}/v1/runs`, {
      conversation_id: "full",
      input: { text: "and another" },
      config,
    });
    const refused = await viaRuns.json();
    assert.equal(viaRuns.status, 429);
    assert.equal(refused.error.code, "run.steering_queue_full");
    assert.match(refused.error.message, /100 queued follow-ups/);
    const cancelled = await apiFetch(`${serve.url}/v1/runs/${runId}/cancel`, {
      method: "POST",
    });
    assert.equal((await cancelled.json()).code, "run.cancelled");
    for await (const message of messages) events.push(JSON.parse(message.data));
    const terminal = events.at(-1)!;
    assert.equal(terminal.data.code, "run.cancelled");
    const unprocessed = terminal.data.unprocessed_inputs as { text: string }[];
    assert.equal(unprocessed.length, STEERING_QUEUE_LIMIT);
    assert.ok(!JSON.stringify(unprocessed).includes("one too many"));
  });
});

Deno.test("DELETE /v1/conversations/{id} is 409 while a run is active, then forgets the sessions", async () => {
  await withServe({ args: CUSTOM }, async (serve, dir) => {
    const { gate, runId, events, messages } = await gatedRun(serve, dir, {
      conversation: "forget-me",
      until: "state.updated",
    });
    const url = `${serve.url}/v1/conversations/forget-me`;
    const busy = await apiFetch(url, { method: "DELETE" });
    const body = await busy.json();
    assert.equal(busy.status, 409);
    assert.equal(body.error.code, "http.conflict");
    assert.match(body.error.message, new RegExp(`active run \\(${runId}\\)`));
    const kept = await (await apiFetch(url)).json();
    assert.equal(kept.sessions.length, 1, "the refused DELETE forgot nothing");
    assert.equal(kept.active_run_id, runId);

    await openGate(gate);
    for await (const message of messages) events.push(JSON.parse(message.data));
    assert.equal(events.at(-1)?.type, "run.completed");
    const deleted = await apiFetch(url, { method: "DELETE" });
    assert.deepEqual(await deleted.json(), {
      conversation_id: "forget-me",
      deleted_sessions: 1,
    });
    const forgotten = await (await apiFetch(url)).json();
    assert.deepEqual(
      [forgotten.sessions, forgotten.active_run_id],
      [[], null],
    );
  });
});
