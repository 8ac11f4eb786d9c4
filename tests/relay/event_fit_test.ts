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

/** All frames of `event` under `limit`, parsed; frames over it are kept too. */
function anyFramesOf(event: JsonObject, limit: number, runner?: JsonObject) {
  return encodeEventFrames("job-1", event, limit, runner).map((frame) => ({
    bytes: new TextEncoder().encode(frame).length,
    frame: JSON.parse(frame) as Frame,
  }));
}

/** The bytes of `event`'s frame as it is. */
function frameBytes(event: JsonObject, runner?: JsonObject): number {
  return new TextEncoder().encode(
    encodeEventFrames("job-1", event, 1 << 30, runner)[0],
  ).length;
}

Deno.test("event fit: an event of exactly the limit, or under it, is one frame as it was, whatever its all_content or flags", () => {
  const event = delta("hello", { all_content: "not ending with it" });
  const flagged = {
    type: "tool.call.completed",
    data: { tool_call_id: "t1", output: "ok", truncated: true },
  };
  for (const item of [event, flagged]) {
    for (const limit of [frameBytes(item), frameBytes(item) + 100]) {
      const frames = framesOf(item, undefined, limit);
      assert.equal(frames.length, 1);
      assert.deepEqual(frames[0].event, item);
      assert.equal("runner" in frames[0], false);
    }
  }
});

Deno.test("event fit: an oversized event with nothing to cut comes back whole, not lost and not flagged as cut", () => {
  const numbers: JsonObject = {};
  for (let index = 0; index < 200; index++) numbers[`n${index}`] = index;
  for (
    const event of [
      { type: "run.heartbeat", padding: "p".repeat(2000) },
      { type: "usage.updated", data: numbers },
    ] as JsonObject[]
  ) {
    const frames = anyFramesOf(event, LIMIT);
    assert.equal(frames.length, 1, String(event.type));
    assert.ok(frames[0].bytes > LIMIT);
    assert.deepEqual(frames[0].frame.event, event);
    assert.equal("runner" in frames[0].frame, false);
  }
});

Deno.test("event fit: runner details too large for a frame are cut as well, their own data flagged; the caller's objects are not touched", () => {
  const runner = { seq: 4, data: { note: "r".repeat(3000) } };
  const event = {
    type: "tool.call.completed",
    data: { tool_call_id: "t1", output: "o".repeat(3000) },
  };
  const [frame] = framesOf(event, runner);
  const details = frame.runner as { seq: number; data: JsonObject };
  assert.equal(details.seq, 4);
  assert.ok(String(details.data.note).length < 3000);
  assert.equal(details.data.truncated, true);
  assert.equal(runner.data.note.length, 3000, "the caller's details");
  assert.equal(event.data.output.length, 3000, "the caller's event");
  const small = { seq: 5, data: { kept: "yes" } };
  const [cut] = framesOf(event, small);
  assert.deepEqual(cut.runner, {
    seq: 5,
    data: { kept: "yes", truncated: true },
  });
  assert.deepEqual(small, { seq: 5, data: { kept: "yes" } });
});

Deno.test("event fit: a cut event whose message is null keeps it null", () => {
  const event = {
    type: "message.completed",
    data: { message: null, note: "n".repeat(3000) },
  };
  const [frame] = framesOf(event);
  assert.equal(frame.event.data.message, null);
  assert.deepEqual(frame.runner, { data: { truncated: true } });
});

Deno.test("event fit: only a message.delta with text is split; any other event with a chunk, or a delta with empty or no text, is cut to one frame", () => {
  const chunked = [
    {
      type: "tool.call.updated",
      data: { chunk: { content: "c".repeat(3000) } },
    },
    delta("", { note: "n".repeat(3000) }),
    {
      type: "message.delta",
      data: { chunk: { content: 5, note: "n".repeat(3000) } },
    },
    {
      type: "message.delta",
      data: { chunk: "c".repeat(3000) },
    },
  ];
  for (const event of chunked) {
    const frames = framesOf(event as JsonObject);
    assert.equal(frames.length, 1, JSON.stringify(event).slice(0, 60));
    assert.deepEqual(frames[0].runner, { data: { truncated: true } });
    assert.equal(frames[0].event.type, event.type);
  }
});

Deno.test("event fit: a delta's all_content that is no text is left out of its pieces", () => {
  const text = "q".repeat(1500);
  const pieces = chunks(framesOf(delta(text, { all_content: 5 })));
  assert.ok(pieces.length > 1);
  assert.equal(pieces.map((piece) => piece.content).join(""), text);
  assert.ok(pieces.every((piece) => !("all_content" in piece)));
});

Deno.test("event fit: each piece fills its frame to the limit, no more frames than needed", () => {
  const empty = frameBytes(delta(""));
  for (const room of [16, 17, 40]) {
    const text = "a".repeat(room * 3);
    const frames = anyFramesOf(delta(text), empty + room);
    assert.equal(frames.length, 3, `room ${room}`);
    for (const { bytes } of frames) assert.equal(bytes, empty + room);
    assert.equal(
      chunks(frames.map(({ frame }) => frame)).map((piece) => piece.content)
        .join(""),
      text,
    );
  }
});

Deno.test("event fit: all_content rides on the first piece while 16 bytes of text still fit beside it", () => {
  const before = "b".repeat(30);
  const text = "y".repeat(100);
  const limit = frameBytes(delta("", { all_content: before })) + 16;
  const pieces = chunks(
    framesOf(delta(text, { all_content: before + text }), undefined, limit),
  );
  assert.equal(pieces[0].all_content, before + pieces[0].content);
  assert.equal(pieces.map((piece) => piece.content).join(""), text);
});

Deno.test("event fit: no piece ends inside a surrogate pair, at any limit; a lone one at the end still arrives", () => {
  for (const pair of ["\u{10000}", "\u{10FFFF}", "\u{1F600}"]) {
    const text = pair.repeat(400);
    for (let limit = LIMIT; limit < LIMIT + 4; limit++) {
      const pieces = chunks(framesOf(delta(text), undefined, limit));
      assert.equal(pieces.map((piece) => piece.content).join(""), text);
      for (const piece of pieces) {
        const content = piece.content as string;
        const last = content.charCodeAt(content.length - 1);
        assert.ok(last < 0xd800 || last > 0xdbff, `${pair} at ${limit}`);
      }
    }
  }
  const lone = "l".repeat(1500) + "\ud83d";
  const pieces = chunks(framesOf(delta(lone)));
  assert.equal(pieces.map((piece) => piece.content).join(""), lone);
});
