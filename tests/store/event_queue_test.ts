import assert from "node:assert/strict";
import { RunnerError } from "../../lib/errors.ts";
import { BatchWriter } from "../../lib/store/postgres/batch_writer.ts";
import { EventQueue, type QueuedEvent } from "../../lib/store/event_queue.ts";
import { queuedEvent } from "../event_queue_helpers.ts";

function sequences(batch: QueuedEvent[]): number[] {
  return batch.map((item) => item.sequence);
}

Deno.test("a full queue is written at once, in one batch", () => {
  const batches: number[][] = [];
  const queue = new EventQueue({
    write: (batch) => batches.push(sequences(batch)),
    onFlushError: () => assert.fail("no write fails"),
  });
  for (let sequence = 1; sequence <= 256; sequence++) {
    queue.push(queuedEvent(sequence));
  }
  assert.equal(batches.length, 1);
  assert.deepEqual(batches[0], Array.from({ length: 256 }, (_, i) => i + 1));
  queue.close();
});

Deno.test("a failed flush keeps the events queued, in order, for the next flush", () => {
  const batches: number[][] = [];
  let fail = true;
  const queue = new EventQueue({
    write(batch) {
      if (fail) throw new RunnerError("store.unavailable", "disk full");
      batches.push(sequences(batch));
    },
    onFlushError: () => assert.fail("no background write runs"),
  });
  queue.push(queuedEvent(1));
  queue.push(queuedEvent(2));
  assert.throws(() => queue.flush(), { code: "store.unavailable" });
  queue.push(queuedEvent(3));
  fail = false;
  queue.flush();
  assert.deepEqual(batches, [[1, 2, 3]]);
  queue.close();
});

Deno.test("a failed background write is reported and retried with its events", async () => {
  const reported = Promise.withResolvers<RunnerError>();
  const written = Promise.withResolvers<number[]>();
  let attempts = 0;
  const queue = new EventQueue({
    write(batch) {
      attempts += 1;
      if (attempts === 1) {
        throw new RunnerError("store.unavailable", "database is locked");
      }
      written.resolve(sequences(batch));
    },
    onFlushError: (error) => reported.resolve(error),
  });
  queue.push(queuedEvent(1));
  queue.push(queuedEvent(2));
  assert.equal((await reported.promise).code, "store.unavailable");
  queue.push(queuedEvent(3));
  assert.deepEqual(await written.promise, [1, 2, 3]);
  assert.equal(attempts, 2);
  queue.close();
});

Deno.test("the events of one turn are one commit; durable() resolves once they are written", async () => {
  const batches: number[][] = [];
  const queue = new EventQueue({
    write: (batch) => batches.push(sequences(batch)),
    onFlushError: () => assert.fail("no write fails"),
  });
  queue.push(queuedEvent(1));
  queue.push(queuedEvent(2));
  let committed = false;
  const durable = queue.durable().then(() => committed = true);
  assert.equal(committed, false);
  await durable;
  assert.deepEqual(batches, [[1, 2]]);
  queue.push(queuedEvent(3));
  await queue.durable();
  assert.deepEqual(batches, [[1, 2], [3]]);
  await queue.durable(); // nothing queued: at once
  queue.close();
});

Deno.test("durable() waits through a failed write and rejects when the queue closes with its events unwritten", async () => {
  const failing = new EventQueue({
    write() {
      throw new RunnerError("store.unavailable", "disk full");
    },
    onFlushError: () => {},
  });
  failing.push(queuedEvent(1));
  const durable = failing.durable();
  assert.throws(() => failing.flush(), { code: "store.unavailable" });
  failing.close();
  await assert.rejects(durable, { code: "store.unavailable" });
});

Deno.test("a batch writer writes what queued during a write as the next batch, at once", async () => {
  const writes: Array<{ batch: number[]; release: () => void }> = [];
  let wrote = Promise.withResolvers<void>();
  const writer = new BatchWriter({
    write(batch) {
      const done = Promise.withResolvers<void>();
      writes.push({ batch: sequences(batch), release: done.resolve });
      wrote.resolve();
      return done.promise;
    },
    onFlushError: () => assert.fail("no write fails"),
  });
  const nextWrite = async () => {
    await wrote.promise;
    wrote = Promise.withResolvers<void>();
    return writes.at(-1)!;
  };
  writer.push(queuedEvent(1));
  const first = writer.durable();
  const one = await nextWrite();
  assert.deepEqual(one.batch, [1]);
  writer.push(queuedEvent(2));
  writer.push(queuedEvent(3));
  let committed = false;
  const second = writer.durable().then(() => committed = true);
  one.release();
  await first;
  const two = await nextWrite();
  assert.deepEqual(two.batch, [2, 3]);
  assert.equal(writes.length, 2);
  assert.equal(committed, false);
  two.release();
  await second;
  writer.close();
});
