/**
 * Coalesced streams of a real `runner serve`: a client that reconnects with
 * `Last-Event-ID` gets exactly the stored events after that id, and a client
 * that does not read while a big run streams costs the runner bounded memory
 * and still gets every byte of the text.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import type { RunEvent } from "../../lib/events.ts";
import { generatedChunk } from "../fixtures/agent_io.ts";
import {
  apiFetch,
  deltaText,
  dropFixtureRun,
  fixtureConfig,
  jsonLines,
  postJson,
  resumeThroughGate,
  sseEvents,
  withServe,
} from "../serve_test_helpers.ts";

function generatedText(chunks: number, bytes: number): string {
  return Array.from({ length: chunks }, (_, i) => generatedChunk(i, bytes))
    .join("");
}

Deno.test("Last-Event-ID after coalescing resumes with exactly the stored events after that id", async () => {
  await withServe({ args: ["--allow-custom-commands"] }, async (serve, dir) => {
    const dropped = await dropFixtureRun(serve, dir, {
      text: "big",
      fixtureFlags: ["--chunks", "3000", "--chunk-bytes", "32"],
    });
    const { runId, first, seen: lastId } = dropped;
    const second = await resumeThroughGate(serve, dropped);

    const stored = await (await apiFetch(`${serve.url}/v1/runs/${runId}`))
      .json();
    assert.deepEqual(
      second,
      stored.events.filter((event: RunEvent) => event.sequence! > lastId),
    );
    assert.deepEqual([...first, ...second], stored.events);
    assert.equal(second.at(-1)!.type, "run.completed");
    assert.equal(deltaText(stored.events), generatedText(3000, 32));
    const replay = await jsonLines(
      await apiFetch(`${serve.url}/v1/runs/${runId}/events`, {
        headers: { accept: "application/x-ndjson", "last-event-id": "2" },
      }),
    );
    assert.deepEqual(replay, stored.events.slice(2));
  });
});

function peakRssMib(pid: number): number {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  return Number(/VmHWM:\s+(\d+) kB/.exec(status)![1]) / 1024;
}

Deno.test("an SSE client that does not read during a 20 000-chunk run costs bounded memory and gets all the text", async () => {
  await withServe({ args: ["--allow-custom-commands"] }, async (serve, dir) => {
    const chunks = 20_000;
    const config = fixtureConfig(join(dir, "ws"), [
      "--chunks",
      String(chunks),
      "--chunk-bytes",
      "32",
    ]);
    const slow = await postJson(`${serve.url}/v1/runs`, {
      input: { text: "big" },
      config,
    });
    const runId = slow.headers.get("x-run-id")!;
    // A second reader follows the run to its end; the first reads nothing.
    const follower = await jsonLines(
      await apiFetch(`${serve.url}/v1/runs/${runId}/events`, {
        headers: { accept: "application/x-ndjson" },
      }),
    ) as unknown as RunEvent[];
    assert.equal(follower.at(-1)!.type, "run.completed");
    // Each chunk alone with its running text would have needed gigabytes.
    const peak = peakRssMib(serve.child.pid);
    assert.ok(peak < 250, `runner serve peaked at ${peak.toFixed(0)} MiB`);
    const late = await sseEvents(slow);
    assert.equal(deltaText(late), generatedText(chunks, 32));
    assert.deepEqual(late, follower);
  });
});
