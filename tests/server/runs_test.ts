/**
 * The runs API of a real `runner serve` subprocess with the fixture agent:
 * the three response formats, follow-up input, cancel, reading runs back, a
 * turn that ends without text after a failed tool.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import type { RunEvent } from "../../lib/events.ts";
import {
  agentCommand,
  apiFetch,
  deltaText,
  fixtureConfig,
  gateIn,
  jsonLines,
  openGate,
  postJson,
  processAlive,
  sseEvents,
  streamUntil,
  terminals,
  withServe,
} from "../serve_test_helpers.ts";

const ARGS = ["--allow-custom-commands"];

function normalize(events: RunEvent[]) {
  return events.map((event) => ({
    type: event.type,
    sequence: event.sequence,
    data: event.type === "state.updated"
      ? { ...event.data, value: "<session>" }
      : event.data,
  }));
}

Deno.test("SSE, NDJSON and stream=false carry the same events", async () => {
  await withServe({ args: ARGS }, async (serve, dir) => {
    const config = {
      ...fixtureConfig(join(dir, "ws"), [
        "--chunks",
        "3",
        "--text",
        "hello there world",
      ]),
      // One delta per chunk, and no run token whose first letter could end a chunk.
      "delta-coalesce-ms": 0,
      "langbot-assets-enabled": false,
    };
    const sse = await postJson(`${serve.url}/v1/runs`, {
      input: { text: "hi" },
      config,
    });
    assert.equal(sse.status, 200);
    assert.match(sse.headers.get("content-type")!, /text\/event-stream/);
    const viaSse = await sseEvents(sse);

    const ndjson = await postJson(`${serve.url}/v1/runs`, {
      input: { text: "hi" },
      config,
    }, {
      accept: "application/x-ndjson",
    });
    assert.match(ndjson.headers.get("content-type")!, /application\/x-ndjson/);
    const viaNdjson = await jsonLines(ndjson) as unknown as RunEvent[];

    const whole = await postJson(`${serve.url}/v1/runs?stream=false`, {
      input: { text: "hi" },
      config,
    });
    const document = await whole.json();
    assert.equal(document.status, "completed");
    assert.equal(document.message, "hello there world");

    assert.equal(deltaText(viaSse), "hello there world");
    assert.equal(
      viaSse.filter((event) => event.type === "message.delta").length,
      3,
    );
    assert.deepEqual(normalize(viaNdjson), normalize(viaSse));
    assert.deepEqual(normalize(document.events), normalize(viaSse));
    assert.equal(terminals(viaSse).length, 1);

    const bodyFlag = await postJson(`${serve.url}/v1/runs`, {
      input: { text: "hi" },
      config,
      stream: false,
    });
    assert.deepEqual(
      normalize((await bodyFlag.json()).events),
      normalize(viaSse),
    );
  });
});

Deno.test("a follow-up sent to /input during a run is answered inside the same run", async () => {
  await withServe({ args: ARGS }, async (serve, dir) => {
    const gate = await gateIn(dir);
    const response = await postJson(`${serve.url}/v1/runs`, {
      conversation_id: "conv-steer",
      input: { text: "first" },
      config: fixtureConfig(join(dir, "ws"), ["--gate-fifo", gate]),
    });
    const runId = response.headers.get("x-run-id")!;
    const { events, messages } = await streamUntil(response, "message.delta");
    const queued = await postJson(`${serve.url}/v1/runs/${runId}/input`, {
      input: { text: "second" },
    });
    assert.equal(queued.status, 202);
    assert.deepEqual(await queued.json(), { run_id: runId, queued: true });

    const steered = await postJson(`${serve.url}/v1/runs`, {
      conversation_id: "conv-steer",
      input: { text: "third" },
      config: fixtureConfig(join(dir, "ws")),
    });
    assert.equal(steered.status, 202);
    assert.deepEqual(await steered.json(), { run_id: runId, steered: true });

    await openGate(gate);
    await openGate(gate);
    await openGate(gate);
    for await (const message of messages) events.push(JSON.parse(message.data));

    const text = deltaText(events);
    assert.match(text, /echo: first \(turn 1\)/);
    assert.match(text, /echo: second \(turn 2\)/);
    assert.match(text, /echo: third \(turn 3\)/);
    assert.equal(
      events.filter((event) => event.type === "run.completed").length,
      1,
    );
    assert.equal(terminals(events).length, 1);
    // Each follow-up is in the run's events, for every reader of the run.
    const turns = (list: RunEvent[]) =>
      list.filter((event) => event.type === "turn.started").map((event) =>
        event.data
      );
    const expected = [
      { turn: 2, input: { text: "second" } },
      { turn: 3, input: { text: "third" } },
    ];
    assert.deepEqual(turns(events), expected);
    const stored = await apiFetch(
      `${serve.url}/v1/runs/${runId}/events?stream=false`,
    );
    assert.deepEqual(
      turns(((await stored.json()) as { events: RunEvent[] }).events),
      expected,
    );

    const late = await postJson(`${serve.url}/v1/runs/${runId}/input`, {
      input: { text: "too late" },
    });
    assert.equal(late.status, 409);
    const body = await late.json();
    assert.equal(body.error.code, "http.conflict");
    assert.match(body.error.message, /not active/);
  });
});

Deno.test("cancel ends the run with one terminal event and leaves no agent process", async () => {
  await withServe({ args: ARGS }, async (serve, dir) => {
    const pidFile = join(dir, "pids.json");
    const response = await postJson(`${serve.url}/v1/runs`, {
      input: { text: "wait" },
      config: fixtureConfig(join(dir, "ws"), [
        "--grandchild",
        "--pid-file",
        pidFile,
        "--stall-prompt",
      ]),
    });
    const runId = response.headers.get("x-run-id")!;
    const { events, messages } = await streamUntil(response, "message.delta");
    const pids = JSON.parse(await Deno.readTextFile(pidFile)) as Record<
      string,
      number
    >;
    assert.equal(Object.keys(pids).length, 3);
    assert.ok(Object.values(pids).every(processAlive));

    const cancelled = await postJson(
      `${serve.url}/v1/runs/${runId}/cancel`,
      {},
    );
    assert.equal(cancelled.status, 200);
    assert.equal((await cancelled.json()).status, "cancelled");
    for await (const message of messages) events.push(JSON.parse(message.data));

    const ends = terminals(events);
    assert.equal(ends.length, 1);
    assert.equal(ends[0].type, "run.failed");
    assert.equal(ends[0].data.code, "run.cancelled");
    for (const [name, pid] of Object.entries(pids)) {
      assert.ok(!processAlive(pid), `${name} ${pid} still alive`);
    }

    const again = await postJson(`${serve.url}/v1/runs/${runId}/cancel`, {});
    assert.equal((await again.json()).status, "cancelled");
  });
});

Deno.test("runs, their events and conversations can be read back", async () => {
  await withServe({ args: ARGS }, async (serve, dir) => {
    const config = fixtureConfig(join(dir, "ws"), ["--text", "stored answer"]);
    const run = await (await postJson(`${serve.url}/v1/runs?stream=false`, {
      run_id: "run-readback",
      conversation_id: "conv-read",
      input: { text: "hi" },
      config,
    })).json();
    assert.equal(run.run_id, "run-readback");

    const record = await (await apiFetch(`${serve.url}/v1/runs/run-readback`))
      .json();
    assert.equal(record.status, "completed");
    assert.equal(record.conversation_id, "conv-read");
    assert.equal(record.config.provider, "custom");
    assert.deepEqual(normalize(record.events), normalize(run.events));

    const after = await apiFetch(
      `${serve.url}/v1/runs/run-readback/events?after=2`,
    );
    const rest = await sseEvents(after);
    assert.deepEqual(
      rest.map((event) => event.sequence),
      run.events.slice(2).map((event: RunEvent) => event.sequence),
    );

    const listed = await (await apiFetch(
      `${serve.url}/v1/runs?conversation_id=conv-read&status=completed`,
    )).json();
    assert.deepEqual(
      listed.runs.map((item: { run_id: string }) => item.run_id),
      ["run-readback"],
    );
    const none = await (await apiFetch(
      `${serve.url}/v1/runs?conversation_id=conv-read&status=failed`,
    )).json();
    assert.deepEqual(none.runs, []);

    const conversation =
      await (await apiFetch(`${serve.url}/v1/conversations/conv-read`)).json();
    assert.equal(conversation.sessions.length, 1);
    const forgotten =
      await (await apiFetch(`${serve.url}/v1/conversations/conv-read`, {
        method: "DELETE",
      })).json();
    assert.equal(forgotten.deleted_sessions, 1);

    // A POST naming an existing run re-attaches to it (docs/http-api.md,
    // "Retries are safe"): the stored events again, no new run.
    const duplicate = await postJson(`${serve.url}/v1/runs`, {
      run_id: "run-readback",
      input: { text: "x" },
      config,
    });
    assert.equal(duplicate.status, 200);
    assert.equal(duplicate.headers.get("x-run-id"), "run-readback");
    assert.deepEqual(
      normalize(await sseEvents(duplicate)),
      normalize(record.events),
    );

    const missing = await apiFetch(`${serve.url}/v1/runs/nope`);
    assert.equal(missing.status, 404);
    assert.deepEqual(Object.keys((await missing.json()).error).sort(), [
      "code",
      "message",
      "retryable",
    ]);

    const badConfig = await postJson(`${serve.url}/v1/runs`, {
      input: { text: "x" },
      config: { ...config, timeout: "soon" },
    });
    assert.equal(badConfig.status, 400);
    assert.equal((await badConfig.json()).error.code, "config.invalid");
    const runs = await (await apiFetch(`${serve.url}/v1/runs`)).json();
    assert.equal(runs.runs.length, 1);

    const providers = await (await apiFetch(`${serve.url}/v1/providers`))
      .json();
    assert.ok(providers.presets.length > 0);
    const health = await apiFetch(`${serve.url}/healthz`);
    assert.equal((await health.json()).status, "ok");
  });
});

Deno.test("a turn that ends without text after a failed tool fails run.tool_failed, not retryable", async () => {
  await withServe({ args: ARGS }, async (serve, dir) => {
    const steps = [["tool-failed", "t1", "pytest: command not found"]];
    const response = await postJson(`${serve.url}/v1/runs`, {
      input: { text: "run the tests" },
      config: {
        ...fixtureConfig(join(dir, "ws")),
        "acp-command": agentCommand(["--script", JSON.stringify(steps)]),
      },
    });
    assert.equal(response.status, 200);
    const events = await sseEvents(response);
    const ends = terminals(events);
    assert.equal(ends.length, 1);
    assert.equal(ends[0].type, "run.failed");
    assert.equal(ends[0].data.code, "run.tool_failed");
    assert.equal(ends[0].data.retryable, false);
    assert.match(
      ends[0].data.error as string,
      /"Tool t1" failed: pytest: command not found/,
    );
  });
});
