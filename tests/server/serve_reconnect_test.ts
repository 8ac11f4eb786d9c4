/**
 * What reconnecting and retrying clients see from a real `runner serve`:
 * `Last-Event-ID` beats `?after=`, a finished run answers 204 so an
 * EventSource stops, SSE carries `retry:`, NDJSON streams keep alive while
 * the agent is silent, and a retried POST re-attaches instead of answering
 * the prompt twice.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import type { RunEvent } from "../../lib/events.ts";
import {
  apiFetch,
  dropFixtureRun,
  fixtureConfig,
  gateIn,
  jsonLines,
  openGate,
  postJson,
  readSse,
  readUntil,
  resumeThroughGate,
  sseEvents,
  streamUntil,
  terminals,
  withServe,
} from "../serve_test_helpers.ts";
import {
  readRest,
  readUntilText,
  textReader,
  within,
} from "../stream_helpers.ts";

Deno.test("Last-Event-ID beats ?after=0, and a finished run answers 204 once everything was delivered", async () => {
  await withServe({ args: ["--allow-custom-commands"] }, async (serve, dir) => {
    const dropped = await dropFixtureRun(serve, dir, {
      text: "reconnect",
      fixtureFlags: ["--chunks", "3"],
    });

    const { runId, first, seen } = dropped;
    // An EventSource created with ?after=0 reconnects with Last-Event-ID.
    const second = await resumeThroughGate(serve, dropped, "?after=0");
    assert.equal(second[0].sequence, seen + 1, "nothing is repeated");
    const all = [...first, ...second];
    assert.deepEqual(all.map((e) => e.sequence), all.map((_, i) => i + 1));
    assert.equal(terminals(all).length, 1);

    // The terminal event was delivered: the reconnect gets 204, no body.
    const last = String(all.at(-1)!.sequence);
    for (const accept of ["text/event-stream", "application/x-ndjson"]) {
      const done = await apiFetch(
        `${serve.url}/v1/runs/${runId}/events?after=0`,
        { headers: { "last-event-id": last, accept } },
      );
      assert.equal(done.status, 204, accept);
      assert.equal(await done.text(), "");
    }
    // Events still to deliver are sent, then the stream ends.
    const tail = await sseEvents(
      await apiFetch(`${serve.url}/v1/runs/${runId}/events`, {
        headers: { "last-event-id": String(all.length - 1) },
      }),
    );
    assert.deepEqual(tail, all.slice(-1));
  });
});

Deno.test("an SSE stream tells EventSource when to reconnect (retry:) and names every event", async () => {
  await withServe({ args: ["--allow-custom-commands"] }, async (serve, dir) => {
    const response = await postJson(`${serve.url}/v1/runs`, {
      input: { text: "retry" },
      config: fixtureConfig(join(dir, "ws")),
    });
    const text = await response.text();
    const blocks = text.split("\n\n").filter((block) => block.trim());
    assert.match(blocks[0], /^retry: \d+\n/);
    for (const block of blocks.filter((b) => !b.startsWith(":"))) {
      assert.match(block, /^(retry: \d+\n)?id: \d+\nevent: [a-z.]+\ndata: /m);
    }
  });
});

Deno.test("NDJSON streams send an empty line while the agent is silent", async () => {
  await withServe({
    args: ["--allow-custom-commands", "--keepalive-seconds", "0.05"],
  }, async (serve, dir) => {
    const gate = await gateIn(dir);
    const response = await postJson(`${serve.url}/v1/runs`, {
      input: { text: "quiet" },
      config: fixtureConfig(join(dir, "ws"), ["--gate-fifo", gate]),
    }, { accept: "application/x-ndjson" });
    assert.equal(response.status, 200);
    // The agent holds its turn at the gate: only keep-alives can arrive.
    const reader = textReader(response);
    const text = await within(
      readUntilText(
        reader,
        (sofar) => sofar.includes('"message.delta"') && /\n\n/.test(sofar),
      ),
      "an empty keep-alive line",
    );
    await openGate(gate);
    const lines = (text + await readRest(reader)).split("\n");
    const events = lines.filter((line) => line.trim()).map((line) =>
      JSON.parse(line) as RunEvent
    );
    assert.ok(lines.some((line) => line === ""));
    assert.equal(events.at(-1)!.type, "run.completed");
    assert.deepEqual(
      await jsonLines(
        await apiFetch(`${serve.url}/v1/runs/${events[0].run_id}/events`, {
          headers: { accept: "application/x-ndjson" },
        }),
      ),
      events,
    );
  });
});

/** The assistant messages of a run's events (full form: completions carry their text). */
function completedMessages(events: RunEvent[]): string[] {
  return events.filter((event) => event.type === "message.completed")
    .map((event) => (event.data.message as { content: string }).content);
}

/**
 * Each turn's text: the deltas up to each `message.completed`, which carries
 * the same text whole.
 */
function turnTexts(events: RunEvent[]): string[] {
  const texts: string[] = [];
  let text = "";
  for (const event of events) {
    if (event.type === "message.delta") {
      text += (event.data.chunk as { content: string }).content;
    } else if (event.type === "message.completed") {
      assert.deepEqual(event.data.message, {
        role: "assistant",
        content: text,
      });
      texts.push(text);
      text = "";
    }
  }
  return texts;
}

Deno.test("a retried POST with the same run_id re-attaches to the run and never answers the prompt twice", async () => {
  await withServe({ args: ["--allow-custom-commands"] }, async (serve, dir) => {
    const gate = await gateIn(dir);
    const body = {
      run_id: "retry-1",
      conversation_id: "chat-retry",
      input: { text: "only once" },
      config: fixtureConfig(join(dir, "ws"), ["--gate-fifo", gate]),
    };
    const response = await postJson(`${serve.url}/v1/runs`, body);
    const first: RunEvent[] = [];
    const messages = readSse(response.body!);
    await readUntil(messages, first, (m) => m.event === "message.delta");
    await messages.return(undefined); // the connection drops

    // fetch-event-source sends the same POST again, with Last-Event-ID; this
    // time it asks for all_content, which counts the deltas the first
    // connection already carried.
    const retried = await postJson(
      `${serve.url}/v1/runs?all_content=true`,
      body,
      { "last-event-id": String(first.at(-1)!.sequence) },
    );
    assert.equal(retried.status, 200);
    assert.equal(retried.headers.get("x-run-id"), "retry-1");
    await openGate(gate);
    const second = await sseEvents(retried);
    const all = [...first, ...second];
    assert.deepEqual(all.map((e) => e.sequence), all.map((_, i) => i + 1));
    assert.deepEqual(completedMessages(second), ["echo: only once (turn 1)"]);

    // Once it ended, the same POST answers the stored run (stream=false too):
    // the same events, the text in its deltas and in the completion.
    const again = await postJson(`${serve.url}/v1/runs?stream=false`, body);
    assert.equal(again.status, 200);
    const document = await again.json();
    assert.equal(document.run_id, "retry-1");
    assert.equal(document.message, "echo: only once (turn 1)");
    assert.deepEqual(document.events.slice(0, first.length), first);
    assert.deepEqual(
      document.events.map((e: RunEvent) => [e.sequence, e.type]),
      all.map((e) => [e.sequence, e.type]),
    );
    assert.deepEqual(turnTexts(document.events), [
      "echo: only once (turn 1)",
    ]);
    const runs = await (await apiFetch(
      `${serve.url}/v1/runs?conversation_id=chat-retry`,
    )).json();
    assert.equal(runs.runs.length, 1);

    // The same run_id in another conversation is a conflict, not a new run.
    const other = await postJson(`${serve.url}/v1/runs`, {
      ...body,
      conversation_id: "chat-other",
    });
    assert.equal(other.status, 409);
    assert.equal((await other.json()).error.code, "http.conflict");
  });
});

Deno.test("Idempotency-Key: a repeated POST re-attaches, and a repeated follow-up is queued once", async () => {
  await withServe({ args: ["--allow-custom-commands"] }, async (serve, dir) => {
    const gate = await gateIn(dir);
    const config = fixtureConfig(join(dir, "ws"), ["--gate-fifo", gate]);
    const start = {
      conversation_id: "chat-key",
      input: { text: "first" },
      config,
    };
    const response = await postJson(`${serve.url}/v1/runs`, start, {
      "idempotency-key": "msg-1",
    });
    const runId = response.headers.get("x-run-id")!;
    const { events, messages } = await streamUntil(response, "message.delta");

    const repeat = await postJson(`${serve.url}/v1/runs`, start, {
      "idempotency-key": "msg-1",
      "last-event-id": String(events.at(-1)!.sequence),
    });
    assert.equal(repeat.headers.get("x-run-id"), runId);
    await repeat.body!.cancel();

    const followUp = { ...start, input: { text: "second" } };
    for (let attempt = 0; attempt < 2; attempt++) {
      const steered = await postJson(`${serve.url}/v1/runs`, followUp, {
        "idempotency-key": "msg-2",
      });
      assert.equal(steered.status, 202);
      assert.deepEqual(await steered.json(), { run_id: runId, steered: true });
    }
    await openGate(gate);
    await openGate(gate);
    for await (const message of messages) events.push(JSON.parse(message.data));
    assert.deepEqual(turnTexts(events), [
      "echo: first (turn 1)",
      "echo: second (turn 2)",
    ]);
    assert.equal(terminals(events).length, 1);

    const bad = await postJson(`${serve.url}/v1/runs`, start, {
      "idempotency-key": "x".repeat(300),
    });
    assert.equal(bad.status, 400);
  });
});
