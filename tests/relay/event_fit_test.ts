/**
 * `run.event` frames under the daemon→hub frame limit, as a hub reads them:
 * every frame fits; a long delta arrives as consecutive deltas whose text,
 * joined, is the original (with `all_content` the running text where it
 * fits, `is_final` true on the last only, no surrogate pair cut); any other
 * oversized event is cut with its `truncated` flags in the runner details.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { JsonObject } from "../../lib/relay.ts";
import { encodeEventFrames } from "../../lib/relay/event_fit.ts";

const LIMIT = 600;

interface Frame {
  type: string;
  job_id: string;
  event: { type: string; data: JsonObject };
  runner?: JsonObject;
}

function framesOf(
  event: JsonObject,
  runner?: JsonObject,
  limit = LIMIT,
): Frame[] {
  const frames = encodeEventFrames("job-1", event, limit, runner);
  for (const frame of frames) {
    assert.ok(
      new TextEncoder().encode(frame).length <= limit,
      `a frame of ${frame.length} bytes`,
    );
  }
  return frames.map((frame) => JSON.parse(frame));
}

function delta(content: string, extra: JsonObject = {}): JsonObject {
  return {
    type: "message.delta",
    data: { chunk: { role: "assistant", content, ...extra } },
  };
}

function chunks(frames: Frame[]): JsonObject[] {
  return frames.map((frame) => frame.event.data.chunk as JsonObject);
}

Deno.test("event fit: an event under the limit is one frame, as it was, with the runner details", () => {
  const event = delta("hello", { is_final: true });
  const [frame, ...rest] = framesOf(event, { seq: 3 });
  assert.deepEqual(rest, []);
  assert.deepEqual(frame, {
    type: "run.event",
    job_id: "job-1",
    event,
    runner: { seq: 3 },
  });
});

Deno.test("event fit: a long delta becomes consecutive deltas; joined they are the text, the last alone final", () => {
  const text = 'é😀ab"\\\n'.repeat(200);
  const frames = framesOf(delta(text, { is_final: true, msg_sequence: 4 }));
  assert.ok(frames.length > 2, `${frames.length} frames`);
  const pieces = chunks(frames);
  assert.equal(pieces.map((piece) => piece.content).join(""), text);
  for (const piece of pieces) {
    assert.ok((piece.content as string).length > 0, "no empty piece");
    assert.equal(piece.msg_sequence, 4);
    const last = (piece.content as string).charCodeAt(
      (piece.content as string).length - 1,
    );
    assert.ok(last < 0xd800 || last > 0xdbff, "a surrogate pair was cut");
  }
  assert.deepEqual(
    pieces.map((piece) => piece.is_final),
    pieces.map((_, index) => index === pieces.length - 1),
  );
  assert.ok(frames.every((frame) => frame.event.type === "message.delta"));
});

Deno.test("event fit: without is_final the pieces carry none; all_content is the running text while it fits", () => {
  const before = "x".repeat(40);
  const text = "y".repeat(500);
  const pieces = chunks(
    framesOf(delta(text, { all_content: before + text })),
  );
  assert.ok(pieces.length > 1);
  let shown = "";
  for (const piece of pieces) {
    assert.equal("is_final" in piece, false);
    shown += piece.content;
    // Once the running text alone would not fit a frame, it is left out.
    if ("all_content" in piece) assert.equal(piece.all_content, before + shown);
  }
  assert.equal(shown, text);
  assert.equal(pieces[0].all_content, before + pieces[0].content);
});

Deno.test("event fit: all_content that does not end with the delta, or alone would not fit, is left out", () => {
  const text = "z".repeat(500);
  for (
    const allContent of ["other text", "w".repeat(LIMIT) + text]
  ) {
    const pieces = chunks(framesOf(delta(text, { all_content: allContent })));
    assert.ok(pieces.length > 1);
    assert.equal(pieces.map((piece) => piece.content).join(""), text);
    const kept = pieces.filter((piece) => "all_content" in piece);
    for (const piece of kept) {
      assert.ok(
        (allContent as string).startsWith(String(piece.all_content)),
        "all_content, where kept, is the running text",
      );
    }
    if (!allContent.endsWith(text)) assert.deepEqual(kept, []);
  }
});

Deno.test("event fit: any other oversized event is cut to one frame, its truncated flag in the runner details", () => {
  const event = {
    type: "tool.call.completed",
    data: { tool_call_id: "t1", output: "o".repeat(5000) },
  };
  const frames = framesOf(event, { seq: 9 });
  assert.equal(frames.length, 1);
  const [frame] = frames;
  assert.equal(frame.event.data.tool_call_id, "t1");
  const output = frame.event.data.output as string;
  assert.ok(output.length > 100 && output.length < 5000, `${output.length}`);
  assert.ok("o".repeat(5000).startsWith(output));
  assert.equal("truncated" in frame.event.data, false);
  assert.deepEqual(frame.runner, { seq: 9, data: { truncated: true } });
  assert.equal(event.data.output.length, 5000, "the event itself is not cut");
});

Deno.test("event fit: a message.completed cut keeps its message object closed, the flag lifted", () => {
  const event = {
    type: "message.completed",
    data: { message: { role: "assistant", content: "m".repeat(5000) } },
  };
  const [frame] = framesOf(event);
  const message = frame.event.data.message as JsonObject;
  assert.equal(message.role, "assistant");
  assert.equal("truncated" in message, false);
  assert.deepEqual(frame.runner, { data: { truncated: true } });
});

Deno.test("event fit: a delta whose other fields alone do not fit is cut like any event", () => {
  const event = delta("short text", { note: "n".repeat(5000) });
  const frames = framesOf(event);
  assert.equal(frames.length, 1);
  const chunk = chunks(frames)[0];
  assert.ok(String(chunk.note).length < 5000);
  assert.deepEqual(frames[0].runner, { data: { truncated: true } });
});
