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

Deno.test("utf8Bytes, utf8Tail and utf8Head agree with UTF-8 at every size boundary and on lone surrogates", () => {
  const edges = [
    "\u007f",
    "\u0080",
    "\u07ff",
    "\u0800",
    "\ud7ff",
    "\ue000",
    "\uffff",
    "\u{10000}",
    "\u{10ffff}",
    "\ud800",
    "\udbff",
    "\udc00",
    "\udfff",
  ];
  // Each edge between one-byte characters; a whole character also doubled
  // and before a two-byte one (lone surrogates never come out of a decoder).
  const texts = edges.flatMap((edge) => [
    `a${edge}b`,
    ...(edge.isWellFormed() ? [`${edge}${edge}`, `${edge}\u00e9`] : []),
  ]);
  for (const text of texts) {
    const label = JSON.stringify(text);
    assert.equal(utf8Bytes(text), bytes(text), label);
    for (let limit = 0; limit <= bytes(text); limit++) {
      const tail = utf8Tail(text, limit);
      const head = utf8Head(text, limit);
      assert.ok(text.endsWith(tail) && text.startsWith(head), label);
      // The longest whole characters that fit: adding the next one would not.
      const before = text.slice(0, text.length - tail.length);
      const after = text.slice(head.length);
      const next = (part: string, fromEnd: boolean) => {
        const chars = [...part];
        return (fromEnd ? chars.at(-1) : chars[0]) ?? "";
      };
      assert.ok(bytes(tail) <= limit, `${label} tail ${limit}`);
      assert.ok(bytes(head) <= limit, `${label} head ${limit}`);
      // (A lone surrogate never comes out of a decoder: whole characters only.)
      if (!text.isWellFormed()) continue;
      assert.ok(
        before === "" || bytes(next(before, true) + tail) > limit,
        `${label} tail ${limit}: ${JSON.stringify(tail)} could keep more`,
      );
      assert.ok(
        after === "" || bytes(head + next(after, false)) > limit,
        `${label} head ${limit}: ${JSON.stringify(head)} could keep more`,
      );
    }
  }
  assert.equal(utf8Bytes("a\ud83d"), 4, "a lone high surrogate at the end");
  assert.equal(utf8Tail("abc", 3), "abc");
  assert.equal(utf8Tail("abc", 10), "abc", "room to spare");
  assert.equal(utf8Tail("a\u0080", 3), "a\u0080");
  assert.equal(utf8Head("\u0800b", 3), "\u0800");
});

Deno.test("a terminal's output: nothing yet is empty; an empty chunk adds nothing; a chunk of exactly the limit is kept whole, not truncated", () => {
  const output = new TerminalOutput(6);
  assert.equal(output.text(), "");
  assert.equal(output.push(""), "");
  assert.equal(output.text(), "");
  assert.equal(output.truncated, false);
  assert.equal(output.push("abcdef"), "abcdef");
  assert.equal(output.text(), "abcdef");
  assert.equal(output.truncated, false);
  assert.equal(output.push("gh"), "gh");
  assert.equal(output.text(), "cdefgh");
  assert.equal(output.truncated, true);
  assert.equal(output.push("0123456789"), "456789", "alone past the limit");
  assert.equal(output.text(), "456789");
});
