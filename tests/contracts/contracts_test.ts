/**
 * The contract schemas themselves: LangBot's recorded relay transcripts
 * validate in both directions, and the near misses of the LangBot model
 * (fractional timestamps, extra payload keys, a string tool result) fail.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import type { RunEvent } from "../../lib/events.ts";
import type { JsonObject } from "../../lib/relay.ts";
import { encodeEventFrames } from "../../lib/relay/event_fit.ts";
import {
  fromRelayEvent,
  type RunnerDetails,
  toRelayEvent,
} from "../../lib/relay/wire_events.ts";
import {
  assertHttpEvent,
  assertLangBotEvent,
  assertN8nObject,
  assertRelayFrame,
  type RelayDirection,
} from "../contracts.ts";
import { ROOT } from "../helpers.ts";

const TRANSCRIPTS = join(ROOT, "tests", "fixtures", "relay-transcripts");

interface Transcript {
  frames: { dir: RelayDirection; text: string }[];
}

/** Frames written by hand to provoke refusals, not by a real peer. */
function handWritten(text: string): boolean {
  try {
    const frame = JSON.parse(text);
    return frame?.type === "daemon.hello" &&
      (frame.protocol !== "coding-relay-v1" ||
        !String(frame.daemon_id ?? "").trim() ||
        String(frame.daemon_id).length > 128);
  } catch {
    return true;
  }
}

Deno.test("every frame of LangBot's recorded transcripts validates, both directions", () => {
  let checked = 0;
  for (const entry of Deno.readDirSync(TRANSCRIPTS)) {
    if (!entry.name.endsWith(".json")) continue;
    const transcript: Transcript = JSON.parse(
      Deno.readTextFileSync(join(TRANSCRIPTS, entry.name)),
    );
    for (const frame of transcript.frames) {
      if (frame.dir === "daemon->hub" && handWritten(frame.text)) continue;
      assertRelayFrame(frame.text, frame.dir);
      checked++;
    }
  }
  assert.ok(checked > 30, `only ${checked} frames checked`);
});

const completed = {
  run_id: "r",
  type: "run.completed",
  data: {
    finish_reason: "stop",
    message: { role: "assistant", content: "hi" },
  },
  sequence: 3,
  timestamp: 1_796_155_812,
};

Deno.test("LangBot's model: whole-second timestamps only", () => {
  assertLangBotEvent(completed);
  assert.throws(
    () => assertLangBotEvent({ ...completed, timestamp: 1_796_155_812.533 }),
    /\/timestamp/,
  );
});

Deno.test("LangBot's model: payloads carry only their own keys", () => {
  assert.throws(
    () =>
      assertLangBotEvent({
        ...completed,
        data: { ...completed.data, stop_reason: "end_turn" },
      }),
    /\/data.*stop_reason/,
  );
  const started = {
    run_id: "r",
    type: "tool.call.started",
    data: { tool_call_id: "t", tool_name: "Read", parameters: {} },
  };
  assertLangBotEvent(started);
  assert.throws(
    () =>
      assertLangBotEvent({
        ...started,
        data: { ...started.data, kind: "read" },
      }),
    /kind/,
  );
  assert.throws(() =>
    assertLangBotEvent({
      run_id: "r",
      type: "run.failed",
      data: { error: "e", code: "c", retryable: true, runner_code: "x" },
    }), /runner_code/);
});

Deno.test("LangBot's model: a tool result is an object or null, an error a string", () => {
  const done = (data: Record<string, unknown>) => ({
    run_id: "r",
    type: "tool.call.completed",
    data: { tool_call_id: "t", tool_name: "Read", ...data },
  });
  assertLangBotEvent(done({ result: { text: "ok" }, error: null }));
  assertLangBotEvent(done({ result: null, error: "failed" }));
  assert.throws(() => assertLangBotEvent(done({ result: "ok" })), /result/);
  assert.throws(() => assertLangBotEvent(done({ result: [1] })), /result/);
  assert.throws(() => assertLangBotEvent(done({ error: { a: 1 } })), /error/);
});

Deno.test("LangBot's model: unknown types pass with any data, known fields still typed", () => {
  assertLangBotEvent({ run_id: "r", type: "thought.delta", data: { x: 1 } });
  assert.throws(
    () => assertLangBotEvent({ run_id: "r", type: "x", data: "text" }),
    /\/data/,
  );
  assert.throws(
    () =>
      assertLangBotEvent({
        run_id: "r",
        type: "x",
        data: {},
        usage: { prompt_tokens: 1.5 },
      }),
    /prompt_tokens/,
  );
});

Deno.test("turn.started: the HTTP schema types it, and on the relay wire it is a frame LangBot accepts that comes back as it was", () => {
  const event = {
    run_id: "r",
    type: "turn.started",
    sequence: 7,
    timestamp: 1_760_000_000_123,
    data: {
      turn: 2,
      input: {
        text: "and <b>then</b>",
        attachments: [{ name: "a.png", mime_type: "image/png" }],
      },
    },
  };
  assertHttpEvent(event);
  assert.throws(
    () => assertHttpEvent({ ...event, data: { turn: "2", input: {} } }),
    /turn|text/,
  );
  const { event: wire, runner } = toRelayEvent(event);
  const frames = encodeEventFrames(
    "job-1",
    wire as unknown as JsonObject,
    undefined,
    runner as unknown as JsonObject | undefined,
  );
  assert.equal(frames.length, 1);
  const frame = assertRelayFrame(frames[0], "daemon->hub");
  assertLangBotEvent({ ...(frame.event as object), run_id: "r" });
  assert.deepEqual(
    fromRelayEvent(frame.event as RunEvent, frame.runner as RunnerDetails),
    event,
  );
});

Deno.test("n8n stream objects: items with text, end; nothing else", () => {
  assertN8nObject({ type: "item", content: "a" });
  assertN8nObject({ type: "end" });
  assert.throws(() => assertN8nObject({ type: "item", content: 1 }));
  assert.throws(() => assertN8nObject({ type: "item" }));
  assert.throws(() => assertN8nObject({ type: "end", extra: true }));
});
