/**
 * The bytes a WebSocket has read but not yet parsed: reads go straight into
 * its free tail and frames are taken from its head, so each byte is copied
 * once however a frame is split across reads. It starts small (an idle
 * connection holds a few KiB), grows by doubling for a large frame, and
 * shrinks back once that frame is taken.
 *
 * @module
 */

/** The capacity of a new or emptied buffer, in bytes. */
const SMALL_CAPACITY = 4 * 1024;
/** An emptied buffer larger than this shrinks back to {@linkcode SMALL_CAPACITY}. */
const KEEP_CAPACITY = 64 * 1024;

/** A growable queue of bytes read from a socket. */
export class ReadBuffer {
  #bytes: Uint8Array;
  #start = 0;
  #end = 0;

  /** Starts with `initial` (bytes already read past the upgrade request). */
  constructor(initial: Uint8Array = new Uint8Array()) {
    this.#bytes = new Uint8Array(Math.max(SMALL_CAPACITY, initial.length));
    this.#bytes.set(initial);
    this.#end = initial.length;
  }

  /** The unparsed bytes (a view, valid until the next call). */
  get view(): Uint8Array {
    return this.#bytes.subarray(this.#start, this.#end);
  }

  /** How many unparsed bytes there are. */
  get length(): number {
    return this.#end - this.#start;
  }

  /** The free tail to read into, at least `atLeast` bytes long. */
  room(atLeast = SMALL_CAPACITY): Uint8Array {
    if (this.#bytes.length - this.#end < atLeast) this.#makeRoom(atLeast);
    return this.#bytes.subarray(this.#end);
  }

  /** Counts `count` bytes read into {@linkcode room} as unparsed. */
  commit(count: number): void {
    this.#end += count;
  }

  /** Drops `count` bytes from the head (parsed, or skipped unread). */
  consume(count: number): void {
    this.#start = Math.min(this.#end, this.#start + count);
    if (this.#start < this.#end) return;
    this.#start = this.#end = 0;
    if (this.#bytes.length > KEEP_CAPACITY) {
      this.#bytes = new Uint8Array(SMALL_CAPACITY);
    }
  }

  #makeRoom(atLeast: number): void {
    const used = this.length;
    let capacity = this.#bytes.length;
    while (capacity - used < atLeast) capacity *= 2;
    const target = capacity === this.#bytes.length
      ? this.#bytes
      : new Uint8Array(capacity);
    target.set(this.view);
    this.#bytes = target;
    this.#start = 0;
    this.#end = used;
  }
}
