/**
 * What a client that waits for the completion gets from a real
 * `runner serve` (LangBot maps `message.completed` to the complete message):
 * by default both completions carry the whole answer on SSE, NDJSON, JSON
 * answers, the stored events read back and a resumed stream; the
 * answer-once form is an opt-in (`completions=lean`).
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import type { RunEvent } from "../../lib/events.ts";
import {
  apiFetch,
  deltaText,
  dropAfterFirstDelta,
  fixtureConfig,
  jsonLines,
  openGate,
  postJson,
  sseEvents,
  terminals,
  withServe,
} from "../serve_test_helpers.ts";

const ANSWER = "the whole answer, in pieces";

/** A fixture run config answering {@linkcode ANSWER} in several deltas. */
function answerConfig(dir: string, flags: string[] = []) {
  return {
    ...fixtureConfig(join(dir, "ws"), [
      "--text",
      ANSWER,
      "--chunks",
      "5",
      ...flags,
    ]),
    "delta-coalesce-ms": 0,
  };
}

function completion(events: RunEvent[], type: string): RunEvent {
  const found = events.filter((event) => event.type === type);
  assert.equal(found.length, 1, `one ${type} in ${events.map((e) => e.type)}`);
  return found[0];
}

/**
 * message.completed carries the text the deltas joined, run.completed leaves
 * it to message.completed (the answer at most twice), and no delta has
 * all_content.
 */
function assertFull(events: RunEvent[], what: string): void {
  assert.equal(deltaText(events), ANSWER, `${what}: the deltas`);
  const message = { role: "assistant", content: ANSWER };
  assert.deepEqual(
    completion(events, "message.completed").data.message,
    message,
    `${what}: message.completed`,
  );
  assert.equal(
    completion(events, "run.completed").data.message,
    undefined,
    `${what}: run.completed leaves the answer to message.completed`,
  );
  for (const event of events.filter((e) => e.type === "message.delta")) {
    assert.ok(
      !("all_content" in (event.data.chunk as object)),
      `${what}: all_content only on request`,
    );
  }
}

/** The answer once, in the deltas; the completions leave it out. */
function assertLean(events: RunEvent[], what: string): void {
  assert.equal(deltaText(events), ANSWER, `${what}: the deltas`);
  assert.deepEqual(
    completion(events, "message.completed").data,
    { message: { role: "assistant" } },
    `${what}: message.completed`,
  );
  assert.equal(
    completion(events, "run.completed").data.message,
    undefined,
    `${what}: run.completed`,
  );
}

Deno.test("by default both completions carry the whole answer: SSE, NDJSON, a JSON answer and the stored events read back", async () => {
  await withServe({ args: ["--allow-custom-commands"] }, async (serve, dir) => {
    const config = answerConfig(dir);
    const sse = await postJson(`${serve.url}/v1/runs`, {
      input: "hi",
      config,
    });
    const runId = sse.headers.get("x-run-id")!;
    const streamed = await sseEvents(sse);
    assert.equal(terminals(streamed).at(-1)?.type, "run.completed");
    assertFull(streamed, "SSE");
    assert.ok(
      streamed.filter((e) => e.type === "message.delta").length > 1,
      "the answer came in several deltas",
    );

    const ndjson = await postJson(`${serve.url}/v1/runs`, {
      input: "hi",
      config,
    }, { accept: "application/x-ndjson" });
    assertFull(
      await jsonLines(ndjson) as unknown as RunEvent[],
      "NDJSON",
    );

    const answer = await postJson(`${serve.url}/v1/runs?stream=false`, {
      input: "hi",
      config,
    });
    const document = await answer.json();
    assert.equal(document.message, ANSWER);
    assertFull(document.events, "JSON answer");

    // The stored events, read back after the run ended.
    const stored = await (await apiFetch(
      `${serve.url}/v1/runs/${runId}/events?stream=false`,
    )).json();
    assertFull(stored.events, "GET /v1/runs/{id}/events?stream=false");
    const run = await (await apiFetch(`${serve.url}/v1/runs/${runId}`)).json();
    assertFull(run.events, "GET /v1/runs/{id}");
    assertFull(
      await sseEvents(await apiFetch(`${serve.url}/v1/runs/${runId}/events`)),
      "GET /v1/runs/{id}/events (SSE replay)",
    );
  });
});

Deno.test("completions=lean carries the answer once, as a query or body field; with all_content=true or an unknown value it is refused", async () => {
  await withServe({ args: ["--allow-custom-commands"] }, async (serve, dir) => {
    const config = answerConfig(dir);
    const sse = await postJson(`${serve.url}/v1/runs?completions=lean`, {
      input: "hi",
      config,
    });
    const runId = sse.headers.get("x-run-id")!;
    assertLean(await sseEvents(sse), "SSE");

    const answer = await postJson(`${serve.url}/v1/runs`, {
      input: "hi",
      config,
      stream: false,
      completions: "lean",
    });
    const document = await answer.json();
    assert.equal(document.message, ANSWER, "the document's message stays");
    assertLean(document.events, "JSON answer");

    // The stored events stay full; a reader asks for the lean form.
    const read = (query: string) =>
      apiFetch(`${serve.url}/v1/runs/${runId}/events${query}`);
    assertLean(
      (await (await read("?stream=false&completions=lean")).json()).events,
      "read back lean",
    );
    assertFull(
      (await (await read("?stream=false&completions=full")).json()).events,
      "read back full",
    );
    const ndjson = await apiFetch(
      `${serve.url}/v1/runs/${runId}/events?completions=lean`,
      { headers: { accept: "application/x-ndjson" } },
    );
    assertLean(
      await jsonLines(ndjson) as unknown as RunEvent[],
      "NDJSON replay",
    );

    for (
      const query of [
        "?stream=false&completions=lean&all_content=true",
        "?stream=false&completions=short",
      ]
    ) {
      const refused = await read(query);
      assert.equal(refused.status, 400, query);
      assert.equal((await refused.json()).error.code, "http.bad_request");
    }
    const refusedStart = await postJson(`${serve.url}/v1/runs`, {
      input: "hi",
      config,
      completions: "none",
    });
    assert.equal(refusedStart.status, 400);
    assert.match(
      (await refusedStart.json()).error.message,
      /completions must be full .* or lean/,
    );
  });
});

Deno.test("a stream resumed with Last-Event-ID after the first delta still gets both completions with the whole answer", async () => {
  await withServe({ args: ["--allow-custom-commands"] }, async (serve, dir) => {
    const dropped = await dropAfterFirstDelta(serve, dir, (gate) => ({
      input: "hi",
      config: answerConfig(dir, ["--gate-fifo", gate, "--gate-chunks"]),
    }));
    const { runId, gate, first } = dropped;
    const seen = String(dropped.seen);

    const resume = (query: string) =>
      apiFetch(`${serve.url}/v1/runs/${runId}/events${query}`, {
        headers: { "last-event-id": seen },
      });
    const resumed = Promise.all([resume(""), resume("?completions=lean")]);
    // The next chunk lets the resumed streams start while the run goes on.
    await openGate(gate);
    const [fullResponse, leanResponse] = await resumed;
    for (let chunk = 2; chunk < 5; chunk++) await openGate(gate);
    const [fullRest, leanRest] = await Promise.all([
      sseEvents(fullResponse),
      sseEvents(leanResponse),
    ]);
    assert.equal(fullRest[0].sequence, first.length + 1, "nothing repeated");
    // The resumed stream alone has the answer in its completions.
    assert.deepEqual(
      completion(fullRest, "message.completed").data.message,
      { role: "assistant", content: ANSWER },
    );
    assertFull([...first, ...fullRest], "resumed");
    // The lean reader counts the deltas the first connection carried.
    assertLean([...first, ...leanRest], "resumed lean");
  });
});
