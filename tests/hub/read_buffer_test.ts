import assert from "node:assert/strict";
import { ReadBuffer } from "../../lib/hub/read_buffer.ts";

/** A deterministic pseudo-random sequence (mulberry32). */
function randomFrom(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

Deno.test("a read buffer hands back exactly the bytes read, however reads and takes are split", () => {
  for (let seed = 1; seed <= 50; seed++) {
    const random = randomFrom(seed);
    const source = new Uint8Array(200_000 + Math.floor(random() * 100_000));
    for (let i = 0; i < source.length; i++) source[i] = (i * 31 + seed) & 255;
    const initial = source.subarray(0, Math.floor(random() * 100));
    const buffer = new ReadBuffer(initial);
    let written = initial.length;
    let taken = 0;
    while (taken < source.length) {
      if (written < source.length && random() < 0.6) {
        const room = buffer.room(1 + Math.floor(random() * 70_000));
        const count = Math.min(
          room.length,
          source.length - written,
          1 + Math.floor(random() * 90_000),
        );
        room.set(source.subarray(written, written + count));
        buffer.commit(count);
        written += count;
      } else {
        const count = Math.floor(random() * (buffer.length + 1));
        assert.deepEqual(
          buffer.view.subarray(0, count),
          source.subarray(taken, taken + count),
          `seed ${seed}`,
        );
        buffer.consume(count);
        taken += count;
      }
      assert.equal(buffer.length, written - taken);
    }
  }
});

Deno.test("an emptied read buffer gives its large capacity back", () => {
  const buffer = new ReadBuffer();
  const big = buffer.room(1024 * 1024);
  assert.ok(big.length >= 1024 * 1024);
  buffer.commit(1024 * 1024);
  buffer.consume(1024 * 1024);
  assert.ok(buffer.room().length <= 64 * 1024);
});
