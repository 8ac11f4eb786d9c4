/**
 * The event write queue against a store that fails, and after it closes:
 * a failed write is retried after the retry delay, not hammered (neither by
 * the next event, a full queue nor a timer left from before); an explicit
 * flush that fails is retried in the background too; nothing is written
 * after `close()`, which names the events it lost. "The next turn" is a
 * zero-delay timer set after the queue's own (timers of one delay run in
 * the order they were set), so no test waits on a clock.
 *
 * @module
 */

import assert from "node:assert/strict";
import { RunnerError } from "../../lib/errors.ts";
import { EventQueue } from "../../lib/store/event_queue.ts";
import { queuedEvent } from "../event_queue_helpers.ts";

/** Resolves after every zero-delay timer set so far has run. */
function nextTurn(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
}

/** A queue over a store whose first `failures` writes fail. */
function failingStore(failures: number) {
  const attempts: number[][] = [];
  const written = Promise.withResolvers<number[]>();
  const reported: RunnerError[] = [];
  const queue = new EventQueue({
    write(batch) {
      attempts.push(batch.map((item) => item.sequence));
      if (attempts.length <= failures) {
        throw new RunnerError("store.unavailable", "database is locked");
      }
      written.resolve(attempts.at(-1)!);
    },
    onFlushError: (error) => reported.push(error),
  });
  return { queue, attempts, written: written.promise, reported };
}

Deno.test("after a failed background write, neither the next events nor a full queue write before the retry", async () => {
  const { queue, attempts, written, reported } = failingStore(1);
  queue.push(queuedEvent(1));
  await nextTurn();
  assert.deepEqual(attempts, [[1]]);
  assert.equal(reported.length, 1);
  queue.push(queuedEvent(2));
  await nextTurn();
  assert.deepEqual(attempts, [[1]], "the next event waits for the retry");
  for (let sequence = 3; sequence <= 300; sequence++) {
    queue.push(queuedEvent(sequence));
  }
  assert.deepEqual(attempts, [[1]], "a full queue waits for the retry too");
  const retried = await written;
  assert.deepEqual(retried, Array.from({ length: 300 }, (_, i) => i + 1));
  assert.equal(attempts.length, 2);
  queue.close();
});

Deno.test("a failed flush is retried in the background after the delay, not at the next turn", async () => {
  const { queue, attempts, written } = failingStore(1);
  queue.push(queuedEvent(1));
  assert.throws(() => queue.flush(), { code: "store.unavailable" });
  await nextTurn();
  assert.deepEqual(attempts, [[1]], "the turn's timer does not retry at once");
  assert.deepEqual(await written, [1]);
  queue.close();
});

Deno.test("a flush of an empty queue writes nothing", () => {
  const { queue, attempts } = failingStore(0);
  queue.flush();
  queue.push(queuedEvent(1));
  queue.flush();
  queue.flush();
  assert.deepEqual(attempts, [[1]]);
  queue.close();
});

Deno.test("after close nothing is written: not a timer set before, not the next events, not a full queue", async () => {
  const { queue, attempts } = failingStore(0);
  queue.push(queuedEvent(1));
  queue.flush();
  queue.push(queuedEvent(2));
  queue.close();
  for (let sequence = 3; sequence <= 300; sequence++) {
    queue.push(queuedEvent(sequence));
  }
  await nextTurn();
  assert.deepEqual(attempts, [[1]]);
});

Deno.test("a turn's events set one timer: none is left after a flush to write after close", async () => {
  const { queue, attempts } = failingStore(0);
  queue.push(queuedEvent(1));
  queue.push(queuedEvent(2));
  queue.flush();
  queue.close();
  queue.push(queuedEvent(3));
  await nextTurn();
  assert.deepEqual(attempts, [[1, 2]]);
});

Deno.test("after close a failed flush is not retried (no retry is left pending to write to a closed store)", () => {
  // A retry left pending would also fail this test as a leaked timer.
  const { queue, attempts } = failingStore(Infinity);
  queue.push(queuedEvent(1));
  queue.close();
  assert.throws(() => queue.flush(), { code: "store.unavailable" });
  assert.deepEqual(attempts, [[1]]);
});

Deno.test("closing with events unwritten tells every waiter, then and later, how many were lost and what to check", async () => {
  const { queue } = failingStore(Infinity);
  queue.push(queuedEvent(1));
  queue.push(queuedEvent(2));
  const durable = queue.durable();
  assert.throws(() => queue.flush(), { code: "store.unavailable" });
  queue.close();
  const lost = {
    code: "store.unavailable",
    message:
      "The store closed with 2 run events unwritten; nobody saw them and they are lost. Check that the store can be written (disk space, locks, the database) before the next start.",
  };
  await assert.rejects(durable, lost);
  // A wait asked for after the close fails the same way; it does not hang.
  await assert.rejects(queue.durable(), lost);
});
