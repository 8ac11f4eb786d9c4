/**
 * A client terminal's kept output (`lib/acp/terminal_output.ts`): at most
 * the byte limit, the oldest bytes dropped first, never half a character,
 * `truncated` once anything was dropped.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  TerminalOutput,
  utf8Bytes,
  utf8Head,
  utf8Tail,
} from "../../lib/acp/terminal_output.ts";

const bytes = (text: string) => new TextEncoder().encode(text).length;

Deno.test("utf8Bytes counts as UTF-8 encodes; utf8Tail never splits a character or a surrogate pair", () => {
  for (const text of ["", "abc", "é", "€", "😀", "a😀é€z"]) {
    assert.equal(utf8Bytes(text), bytes(text), text);
  }
  assert.equal(utf8Tail("a😀b", 4), "b");
  assert.equal(utf8Tail("a😀b", 5), "😀b");
  assert.equal(utf8Tail("ééé", 5), "éé");
  assert.equal(utf8Tail("abc", 0), "");
});

Deno.test("the output keeps the newest bytes within the limit, in order, whatever the chunks", () => {
  const text = "héllo wörld 😀 and € more text";
  for (let limit = 1; limit <= bytes(text) + 2; limit++) {
    for (const size of [1, 2, 3, 7, 100]) {
      const output = new TerminalOutput(limit);
      for (let at = 0; at < text.length; at += size) {
        let end = Math.min(text.length, at + size);
        // A chunk is whole characters (each stream is decoded on its own).
        const code = text.charCodeAt(end - 1);
        if (code >= 0xd800 && code <= 0xdbff) end++;
        output.push(text.slice(at, end));
        at = end - size;
      }
      const kept = output.text();
      assert.ok(bytes(kept) <= limit, `${limit}/${size}`);
      assert.ok(text.endsWith(kept), `${limit}/${size}: ${kept}`);
      assert.equal(output.truncated, bytes(text) > limit);
      assert.ok(
        bytes(kept) > limit - 4 || kept === text,
        `${limit}/${size}: at most one character short of the limit`,
      );
    }
  }
});

Deno.test("utf8Head keeps the start up to the byte limit, never splitting a character", () => {
  assert.equal(utf8Head("abc", 2), "ab");
  assert.equal(utf8Head("aé", 2), "a", "é needs 2 more bytes");
  assert.equal(utf8Head("aé", 3), "aé");
  assert.equal(utf8Head("😀x", 3), "", "a surrogate pair is 4 bytes");
  assert.equal(utf8Head("😀x", 5), "😀x");
  assert.equal(utf8Head("abc", 0), "");
});
