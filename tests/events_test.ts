/**
 * The text rules of run events as pure functions: redaction of text that
 * arrives in pieces, the full form (completions whole, put back where a
 * relay frame cut them) and the opt-in lean (answer-once) form.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createStreamRedactor, redactSecrets } from "../lib/secrets.ts";
import {
  createEventRestorer,
  createLeanEvents,
  type RunEvent,
} from "../lib/events.ts";
import { assertStreamShows } from "./redactor_helpers.ts";

function streamed(secrets: string[], pieces: string[]): string {
  const redactor = createStreamRedactor(secrets);
  return pieces.map((piece) => redactor.push(piece)).join("") + redactor.end();
}

Deno.test("a secret cut anywhere into two or three pieces is redacted exactly as in the whole text", () => {
  const secrets = ["sk-live-9f8e7d6c5b", "abcdabcX", "dabc"];
  const text = "x sk-live-9f8e7d6c5b, abcdabcdabcX dabc sk-live-9f8e7d6c5 ok";
  const whole = redactSecrets(text, secrets);
  assert.ok(!whole.includes("sk-live-9f8e7d6c5b"));
  for (let i = 0; i <= text.length; i++) {
    assert.equal(
      streamed(secrets, [text.slice(0, i), text.slice(i)]),
      whole,
      `cut at ${i}`,
    );
    for (let j = i; j <= text.length; j++) {
      assert.equal(
        streamed(secrets, [text.slice(0, i), text.slice(i, j), text.slice(j)]),
        whole,
        `cuts at ${i} and ${j}`,
      );
    }
  }
});

Deno.test("only a tail that could start a secret is held back, until the next piece or the end", () => {
  assertStreamShows(["sk-123456"], [
    ["hello wor", "hello wor"],
    ["ld sk-1", "ld "],
    ["23456!", "[REDACTED]!"],
    [" s", " "],
  ], "s");
  // Too short to be redacted.
  assertStreamShows(["abc"], [["ab", "ab"]]);
});

function delta(content: string, msg: number): RunEvent {
  return {
    run_id: "r",
    type: "message.delta",
    data: { chunk: { role: "assistant", content, msg_sequence: msg } },
  };
}

function completed(content: string): RunEvent {
  return {
    run_id: "r",
    type: "message.completed",
    data: { message: { role: "assistant", content } },
  };
}

function runCompleted(content: string): RunEvent {
  return {
    run_id: "r",
    type: "run.completed",
    data: {
      finish_reason: "end_turn",
      message: { role: "assistant", content },
    },
  };
}

Deno.test("lean events leave out only text the deltas carried, and the restorer puts it back", () => {
  const events = [
    delta("ab", 1),
    delta("cd", 2),
    completed("abcd"),
    completed("not streamed"),
    delta("x", 3),
    completed("xy"), // differs from its deltas: kept whole
    delta("final", 4),
    completed("final"),
    runCompleted("final"),
  ];
  const lean = events.map(createLeanEvents());
  assert.deepEqual(lean[2].data, { message: { role: "assistant" } });
  assert.deepEqual(lean[3], events[3]);
  assert.deepEqual(lean[5], events[5]);
  assert.deepEqual(lean[8].data, { finish_reason: "end_turn" });
  const restored = lean.map(createEventRestorer({ allContent: false }));
  // A run.completed without message stays so: message.completed carried it.
  assert.deepEqual(restored.slice(0, 8), events.slice(0, 8));
  assert.deepEqual(restored[8], lean[8]);
  const full = lean.map(createEventRestorer({ allContent: true }));
  assert.deepEqual(
    full.filter((e) => e.type === "message.delta").map((e) =>
      (e.data.chunk as { all_content: string }).all_content
    ),
    ["ab", "abcd", "x", "final"],
  );
});

Deno.test("a completion that is only the beginning of its deltas' text, or differs inside a piece, keeps its text", () => {
  const events = [
    delta("ab", 1),
    delta("cd", 2),
    completed("abc"), // shorter than the deltas, not marked truncated
    delta("ab", 3),
    delta("cd", 4),
    completed("abXd"), // same length, differs inside the second piece
    delta("ab", 5),
    delta("cd", 6),
    completed("abcde"), // longer
  ];
  const lean = events.map(createLeanEvents());
  assert.deepEqual(lean[2], events[2]);
  assert.deepEqual(lean[5], events[5]);
  assert.deepEqual(lean[8], events[8]);
});

Deno.test("completions cut short on the relay wire, or a message.completed left lean, come back whole from the deltas; other text stays", () => {
  const cut = (event: RunEvent): RunEvent => ({
    ...event,
    data: {
      ...event.data,
      message: { role: "assistant", content: "long te", truncated: true },
    },
  });
  const restore = createEventRestorer({ allContent: false });
  const events = [
    delta("long ", 1),
    delta("text", 2),
    cut(completed("long text")),
    cut(runCompleted("long text")),
  ].map(restore);
  assert.deepEqual(events[2], completed("long text"));
  assert.deepEqual(events[3], runCompleted("long text"));
  // daemon.py sends run.completed without message after message.completed.
  const { message: _, ...bare } = runCompleted("x").data;
  const again = createEventRestorer({ allContent: false });
  const fromDaemonPy = [
    delta("answer", 1),
    { ...completed("answer"), data: { message: { role: "assistant" } } },
    { ...runCompleted("x"), data: bare },
  ].map(again);
  assert.deepEqual(fromDaemonPy[1], completed("answer"));
  assert.deepEqual(fromDaemonPy[2], { ...runCompleted("x"), data: bare });
  // A completion that is not a cut prefix of its deltas keeps its own text.
  const other = createEventRestorer({ allContent: false });
  const kept = [delta("abc", 1), completed("xyz"), runCompleted("xyz")]
    .map(other);
  assert.deepEqual(kept.slice(1), [completed("xyz"), runCompleted("xyz")]);
});

Deno.test("all_content stops once the message reaches 64 KiB", () => {
  const restore = createEventRestorer({ allContent: true });
  const big = "y".repeat(40 * 1024);
  const chunks = [delta(big, 1), delta(big, 2), delta("z", 3)].map(restore)
    .map((e) => e.data.chunk as { all_content?: string });
  assert.deepEqual(chunks.map((c) => c.all_content?.length), [
    40 * 1024,
    undefined,
    undefined,
  ]);
});
