import assert from "node:assert/strict";
import { RunnerError } from "../lib/errors.ts";
import { EventQueue, type QueuedEvent } from "../lib/store/event_queue.ts";

function event(sequence: number): QueuedEvent {
  return {
    runId: "run",
    sequence,
    type: "message.delta",
    json: `{"sequence":${sequence}}`,
    timestamp: sequence,
  };
}

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
    queue.push(event(sequence));
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
  queue.push(event(1));
  queue.push(event(2));
  assert.throws(() => queue.flush(), { code: "store.unavailable" });
  queue.push(event(3));
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
  queue.push(event(1));
  queue.push(event(2));
  assert.equal((await reported.promise).code, "store.unavailable");
  queue.push(event(3));
  assert.deepEqual(await written.promise, [1, 2, 3]);
  assert.equal(attempts, 2);
  queue.close();
});
