/**
 * A client terminal's output as ACP describes it: one text of stdout and
 * stderr in arrival order, kept to a byte limit by dropping from the
 * beginning, always at a character boundary (the kept text may then be a
 * little under the limit), with `truncated` once anything was dropped.
 *
 * @module
 */

/** The UTF-8 size of `text`. */
export function utf8Bytes(text: string): number {
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x80) bytes += 1;
    else if (code < 0x800) bytes += 2;
    else if (code >= 0xd800 && code <= 0xdbff && i + 1 < text.length) {
      bytes += 4;
      i++;
    } else bytes += 3;
  }
  return bytes;
}

/**
 * The end of `text` of at most `limit` UTF-8 bytes, cut at a character
 * boundary (a surrogate pair is never split).
 */
export function utf8Tail(text: string, limit: number): string {
  let bytes = 0;
  let start = text.length;
  while (start > 0) {
    let from = start - 1;
    const code = text.charCodeAt(from);
    let size = code < 0x80 ? 1 : code < 0x800 ? 2 : 3;
    if (code >= 0xdc00 && code <= 0xdfff && from > 0) {
      const high = text.charCodeAt(from - 1);
      if (high >= 0xd800 && high <= 0xdbff) {
        from--;
        size = 4;
      }
    }
    if (bytes + size > limit) break;
    bytes += size;
    start = from;
  }
  return text.slice(start);
}

/**
 * The start of `text` of at most `limit` UTF-8 bytes, cut at a character
 * boundary (a surrogate pair is never split).
 */
export function utf8Head(text: string, limit: number): string {
  let bytes = 0;
  let end = 0;
  while (end < text.length) {
    const code = text.charCodeAt(end);
    const pair = code >= 0xd800 && code <= 0xdbff && end + 1 < text.length;
    const size = code < 0x80 ? 1 : code < 0x800 ? 2 : pair ? 4 : 3;
    if (bytes + size > limit) break;
    bytes += size;
    end += pair ? 2 : 1;
  }
  return text.slice(0, end);
}

/** A terminal's kept output. */
export class TerminalOutput {
  #chunks: { text: string; bytes: number }[] = [];
  #bytes = 0;
  #truncated = false;

  /** Keeps at most `limit` bytes. */
  constructor(readonly limit: number) {}

  /** Appends `text`; returns the part of it that is kept (all of it unless it alone exceeds the limit). */
  push(text: string): string {
    if (!text) return "";
    let kept = text;
    let bytes = utf8Bytes(text);
    if (bytes > this.limit) {
      kept = utf8Tail(text, this.limit);
      bytes = utf8Bytes(kept);
      this.#truncated = true;
      this.#chunks = [];
      this.#bytes = 0;
    }
    this.#chunks.push({ text: kept, bytes });
    this.#bytes += bytes;
    while (this.#bytes > this.limit) {
      const first = this.#chunks[0];
      const room = this.limit - (this.#bytes - first.bytes);
      this.#truncated = true;
      if (room <= 0) {
        this.#chunks.shift();
        this.#bytes -= first.bytes;
        continue;
      }
      const tail = utf8Tail(first.text, room);
      const size = utf8Bytes(tail);
      this.#bytes -= first.bytes - size;
      this.#chunks[0] = { text: tail, bytes: size };
    }
    return kept;
  }

  /** The kept text. */
  text(): string {
    if (this.#chunks.length > 1) {
      const text = this.#chunks.map((chunk) => chunk.text).join("");
      this.#chunks = [{ text, bytes: this.#bytes }];
    }
    return this.#chunks[0]?.text ?? "";
  }

  /** Whether output was dropped from the beginning. */
  get truncated(): boolean {
    return this.#truncated;
  }
}
