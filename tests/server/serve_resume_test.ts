/**
 * A client that drops mid-stream and reconnects with `Last-Event-ID` (or
 * `?after=`) misses no event of a real `runner serve` run.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  apiFetch,
  dropFixtureRun,
  jsonLines,
  resumeThroughGate,
  sseEvents,
  terminals,
  withServe,
} from "../serve_test_helpers.ts";

Deno.test("a dropped SSE client reconnects with Last-Event-ID and misses nothing", async () => {
  await withServe({ args: ["--allow-custom-commands"] }, async (serve, dir) => {
    const dropped = await dropFixtureRun(serve, dir, {
      text: "resume me",
      fixtureFlags: ["--chunks", "4"],
    });
    const { runId, first } = dropped;
    const second = await resumeThroughGate(serve, dropped);

    const all = [...first, ...second];
    assert.deepEqual(
      all.map((event) => event.sequence),
      all.map((_, index) => index + 1),
    );
    assert.equal(terminals(all).length, 1);
    assert.equal(all.at(-1)!.type, "run.completed");

    const stored = await (await apiFetch(`${serve.url}/v1/runs/${runId}`))
      .json();
    assert.deepEqual(stored.events, all);

    // After the run ended: the stored events after N, then the stream ends.
    const late = await sseEvents(
      await apiFetch(`${serve.url}/v1/runs/${runId}/events?after=3`),
    );
    assert.deepEqual(late, all.slice(3));
    const lateNdjson = await jsonLines(
      await apiFetch(`${serve.url}/v1/runs/${runId}/events`, {
        headers: { accept: "application/x-ndjson", "last-event-id": "1" },
      }),
    );
    assert.deepEqual(lateNdjson, all.slice(1));
  });
});
