/**
 * A reader that stalls while a run bursts thousands of events still gets
 * every event, in order, exactly once: past its live buffer it catches up
 * from the store and rejoins live delivery.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { RunEvent } from "../../lib/events.ts";
import { followRunEvents } from "../../lib/server/stream.ts";
import { fixtureConfig, harness } from "../engine_helpers.ts";
import { tempDir } from "../helpers.ts";
import { startInProcessServe } from "../in_process_serve.ts";
import {
  connectTo,
  parseAnswer,
  readToEnd,
  writeAll,
} from "../raw_tcp_helpers.ts";
import { agentCommand, apiHeaderLine } from "../serve_test_helpers.ts";

/** Asserts sequences 1..n without a gap or repeat, and one terminal event last. */
function assertComplete(events: RunEvent[]): void {
  assert.deepEqual(
    events.map((event) => event.sequence),
    events.map((_, index) => index + 1),
    "sequences 1..n, no gap",
  );
  const terminals = events.filter((e) =>
    e.type === "run.completed" || e.type === "run.failed"
  );
  assert.deepEqual(terminals.map((e) => e.type), ["run.completed"]);
  assert.equal(events.at(-1)?.type, "run.completed");
}

function deltaCount(events: RunEvent[]): number {
  return events.filter((e) => e.type === "message.delta").length;
}

function deltaText(events: RunEvent[]): string {
  return events.filter((e) => e.type === "message.delta")
    .map((e) => (e.data.chunk as { content: string }).content).join("");
}

function expectedText(kb: number, count: number): string {
  const size = Math.floor(kb * 1024 / count);
  return Array.from(
    { length: count },
    (_, i) => String(i).padStart(6, "0") + "x".repeat(size - 6),
  ).join("");
}

Deno.test("a follower that reads nothing until the run has ended gets all 600 events from a 20-event buffer", async () => {
  const { manager, store, close } = harness();
  try {
    const outcome = await manager.start({
      input: { text: "burst" },
      // One delta per chunk, so the 600 events overflow the buffer.
      config: fixtureConfig(["--text-kb", "60", "--chunks", "600"], {
        // One delta per chunk, and no run token whose first letter could
        // end a chunk (it would be held back into the next delta).
        "delta-coalesce-ms": 0,
        "langbot-assets-enabled": false,
      }),
    });
    const run = outcome.run;
    const follower = followRunEvents({
      store,
      runId: run.runId,
      run,
      maxPendingEvents: 20,
    });
    await run.done; // the reader stalls for the whole run
    const events: RunEvent[] = [];
    for (let event; (event = await follower.next());) events.push(event);
    assertComplete(events);
    assert.equal(deltaCount(events), 600);
    assert.equal(deltaText(events), expectedText(60, 600));
  } finally {
    await close();
  }
});

/**
 * Starts a run of `kb` KiB in 500 chunks (one delta each) on a server that
 * holds 50 live events per reader, reads nothing until the run is over, then
 * returns the SSE events the POST answered with.
 */
async function stalledSseRun(kb: number, query = ""): Promise<RunEvent[]> {
  const serve = await startInProcessServe({
    dataDir: tempDir(),
    args: ["--allow-custom-commands"],
    maxPendingEvents: 50,
  });
  try {
    const conn = await connectTo(serve.url);
    const body = JSON.stringify({
      input: { text: "burst" },
      config: {
        provider: "custom",
        "acp-command": agentCommand([
          "--text-kb",
          String(kb),
          "--chunks",
          "500",
        ]),
        workspace: tempDir(),
        // One delta per chunk, so the 500 events overflow the buffer; no run
        // token whose first letter could hold a chunk's tail back.
        "delta-coalesce-ms": 0,
        "langbot-assets-enabled": false,
      },
    });
    await writeAll(
      conn,
      `POST /v1/runs${query} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n` +
        apiHeaderLine(serve.url) +
        `content-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`,
    );
    // Read nothing until the run is over: the server's writes block long before.
    const finished = await serve.waitForLog((e) => e.msg === "run finished");
    assert.equal(finished.status, "completed");
    const answer = parseAnswer(await readToEnd(conn));
    assert.equal(answer.status, 200);
    return sseEvents(unchunk(answer.body));
  } finally {
    await serve.close();
  }
}

Deno.test("an SSE reader that stalls during a 4 MiB burst catches up from the store and misses nothing", async () => {
  const events = await stalledSseRun(4096);
  assertComplete(events);
  assert.equal(deltaCount(events), 500);
  assert.equal(deltaText(events), expectedText(4096, 500));
});

Deno.test("a stalled reader that asked for all_content gets the full form across its catch-up from the store", async () => {
  const events = await stalledSseRun(200, "?all_content=true");
  assertComplete(events);
  assert.equal(deltaCount(events), 500);
  const text = expectedText(200, 500);
  let sofar = "";
  for (const event of events.filter((e) => e.type === "message.delta")) {
    const chunk = event.data.chunk as { content: string; all_content?: string };
    sofar += chunk.content;
    // The message so far, while it is under 64 KiB; then no more.
    assert.equal(
      chunk.all_content,
      sofar.length < 64 * 1024 ? sofar : undefined,
    );
  }
  assert.equal(sofar, text);
  const completed = events.filter((e) => e.type.endsWith(".completed"));
  assert.deepEqual(
    completed.map((e) =>
      (e.data.message as { content: string } | undefined)?.content
    ),
    [text, undefined],
    "the answer in message.completed, not again in run.completed",
  );
});

/** The data of a chunked body. */
function unchunk(text: string): string {
  const bytes = new TextEncoder().encode(text);
  const out: Uint8Array[] = [];
  let at = 0;
  for (;;) {
    let lineEnd = at;
    while (bytes[lineEnd] !== 13) lineEnd++;
    const size = parseInt(
      new TextDecoder().decode(bytes.subarray(at, lineEnd)),
      16,
    );
    if (!size) break;
    out.push(bytes.subarray(lineEnd + 2, lineEnd + 2 + size));
    at = lineEnd + 2 + size + 2;
  }
  return new TextDecoder().decode(
    out.reduce((all, part) => {
      const joined = new Uint8Array(all.length + part.length);
      joined.set(all);
      joined.set(part, all.length);
      return joined;
    }, new Uint8Array()),
  );
}

function sseEvents(text: string): RunEvent[] {
  return text.split("\n\n").filter((block) => block.includes("data: "))
    .map((block) =>
      JSON.parse(
        block.split("\n").find((l) => l.startsWith("data: "))!.slice(6),
      )
    );
}
