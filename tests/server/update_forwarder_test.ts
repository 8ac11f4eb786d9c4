/**
 * `/acp`'s forwarder of a turn's updates, against a client connection that
 * takes each notification when the test lets it: updates keep their order,
 * text chunks that waited together arrive as one with the same text, and
 * nothing else is joined or changed.
 *
 * @module
 */

import assert from "node:assert/strict";
import type * as acp from "@agentclientprotocol/sdk";
import type { SessionUpdate } from "@agentclientprotocol/sdk";
import { createUpdateForwarder } from "../../lib/server/acp/update_forwarder.ts";

/**
 * A client connection that holds each notification until `release()`;
 * `release()` resolves when the next one is sent.
 */
function heldClient() {
  const sent: SessionUpdate[] = [];
  let taken = () => {};
  let onSent = () => {};
  const client = {
    notify(_method: string, params: { update: SessionUpdate }) {
      sent.push(structuredClone(params.update));
      onSent();
      return new Promise<void>((resolve) => taken = resolve);
    },
  } as unknown as acp.AgentContext;
  const release = () => {
    const next = new Promise<void>((resolve) => onSent = resolve);
    taken();
    return next;
  };
  /** Lets every notification through until the forwarder has sent all. */
  const releaseAll = async (flushed: Promise<void>) => {
    let done = false;
    flushed.then(() => done = true);
    while (!done) await Promise.race([release(), flushed]);
  };
  return { client, sent, releaseAll };
}

function text(value: string, extra: Record<string, unknown> = {}) {
  return {
    sessionUpdate: "agent_message_chunk",
    content: { type: "text", text: value },
    ...extra,
  } as SessionUpdate;
}

Deno.test("update forwarder: chunks that wait together go as one, in order; other updates and chunks with more than text are not joined", async () => {
  const { client, sent, releaseAll } = heldClient();
  const forwarder = createUpdateForwarder({
    client,
    sessionId: "s",
    maxBytes: 1 << 20,
    onFirstDrop: () => {},
  });
  const tool = {
    sessionUpdate: "tool_call",
    toolCallId: "t",
    title: "ls",
  } as SessionUpdate;
  const thought = {
    sessionUpdate: "agent_thought_chunk",
    content: { type: "text", text: "hm" },
  } as SessionUpdate;
  const waiting = text("b");
  forwarder.send(text("a")); // sent at once: nothing waits before it
  forwarder.send(waiting);
  forwarder.send(text("c"));
  forwarder.send(tool);
  forwarder.send(text("d"));
  forwarder.send(thought);
  forwarder.send(text("e", { _meta: { x: 1 } }));
  forwarder.send(text("f", { messageId: "m2" }));
  forwarder.send(text("g", { messageId: "m2" }));
  forwarder.send(text("h", { messageId: "m3" }));
  await releaseAll(forwarder.flushed());
  assert.deepEqual(sent, [
    text("a"),
    text("bc"),
    tool,
    text("d"),
    thought,
    text("e", { _meta: { x: 1 } }),
    text("fg", { messageId: "m2" }),
    text("h", { messageId: "m3" }),
  ]);
  assert.deepEqual(waiting, text("b"), "the caller's update is not changed");
  assert.equal(forwarder.dropped(), 0);
});

Deno.test("update forwarder: past maxBytes unsent, the rest of the turn is dropped and counted, joined chunks included", async () => {
  const { client, sent, releaseAll } = heldClient();
  let drops = 0;
  const forwarder = createUpdateForwarder({
    client,
    sessionId: "s",
    maxBytes: 1000,
    onFirstDrop: () => drops++,
  });
  const piece = "x".repeat(100);
  for (let i = 0; i < 20; i++) forwarder.send(text(piece));
  assert.equal(drops, 1, "told once");
  const dropped = forwarder.dropped();
  assert.ok(dropped > 0 && dropped < 20, `${dropped} dropped`);
  await releaseAll(forwarder.flushed());
  const shown = sent.map((update) =>
    (update as { content: { text: string } }).content.text
  ).join("");
  assert.equal(shown.length, (20 - dropped) * 100, "what was not dropped came");
  assert.ok(shown.length <= 1000, "no more than maxBytes waited");
});
