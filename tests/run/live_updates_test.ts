/**
 * The live updates a run passes on (`/acp`, the daemon's relay): a secret
 * cut across text chunks never shows in any update, the text of a message
 * is all there once the turn ends, and nothing changes order.
 *
 * @module
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import {
  createLiveUpdateRedactor,
  type LiveUpdate,
} from "../../lib/run/live_updates.ts";
import { redactSecrets } from "../../lib/secrets.ts";
import { chunked } from "../stream_arbitraries.ts";

function chunk(text: string, kind = "agent_message_chunk"): LiveUpdate {
  return { sessionUpdate: kind, content: { type: "text", text } };
}

function textOf(updates: LiveUpdate[], kind = "agent_message_chunk"): string {
  return updates.filter((update) => update.sessionUpdate === kind)
    .map((update) => (update.content as { text: string }).text).join("");
}

Deno.test("live updates: a message's chunks, cut anywhere, show as its redacted text and no chunk holds a secret", () => {
  fc.assert(
    fc.property(chunked(), ({ secrets, text, chunks }) => {
      const redactor = createLiveUpdateRedactor(() => secrets);
      const shown = [
        ...chunks.flatMap((piece) => redactor.push(chunk(piece))),
        ...redactor.end(),
      ];
      assert.equal(textOf(shown), redactSecrets(text, secrets));
      for (const update of shown) {
        const piece = (update.content as { text: string }).text;
        assert.notEqual(piece, "", "an empty chunk");
        for (const secret of secrets) {
          assert.ok(!piece.includes(secret), `${secret} in ${piece}`);
        }
      }
    }),
  );
});

Deno.test("live updates: a tail is held across other updates, another kind and another message id, until the turn ends", () => {
  const secrets = ["sk-0123456789"];
  const redactor = createLiveUpdateRedactor(() => secrets);
  const tool = {
    sessionUpdate: "tool_call",
    toolCallId: "t1",
    title: "echo sk-0123456789",
  };
  const shown = [
    ...redactor.push(chunk("key sk-01")),
    ...redactor.push(tool),
    ...redactor.push(chunk("thinking sk-0", "agent_thought_chunk")),
    ...redactor.push({ ...chunk("23456789 next sk-"), messageId: "m2" }),
    ...redactor.push(chunk("123456789", "agent_thought_chunk")),
    ...redactor.end(),
  ];
  assert.deepEqual(shown, [
    chunk("key "),
    { ...tool, title: "echo [REDACTED]" },
    chunk("thinking ", "agent_thought_chunk"),
    { ...chunk("[REDACTED] next "), messageId: "m2" },
    chunk("[REDACTED]", "agent_thought_chunk"),
    { ...chunk("sk-"), messageId: "m2" },
  ]);
  assert.equal(textOf(shown), "key [REDACTED] next sk-");
});
