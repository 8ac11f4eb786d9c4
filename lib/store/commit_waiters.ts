/**
 * Waiting for queued events to be committed: an event write queue counts the
 * events it queued and the events it committed (batches are always the
 * oldest queued events, so a count is enough) and resolves each waiter once
 * every event queued before it asked is committed.
 *
 * @module
 */

import type { RunnerError } from "../errors.ts";

interface Waiter {
  /** How many events must be committed. */
  target: number;
  resolve: () => void;
  reject: (error: RunnerError) => void;
  promise: Promise<void>;
}

/** The waiters of one event write queue for its commits. */
export class CommitWaiters {
  #queued = 0;
  #committed = 0;
  #waiters: Waiter[] = [];

  /** Counts `count` newly queued events. */
  queued(count = 1): void {
    this.#queued += count;
  }

  /** Counts `count` committed events (the oldest uncommitted ones) and resolves who waited for them. */
  committed(count: number): void {
    this.#committed += count;
    let done = 0;
    while (
      done < this.#waiters.length &&
      this.#waiters[done].target <= this.#committed
    ) {
      this.#waiters[done++].resolve();
    }
    if (done) this.#waiters.splice(0, done);
  }

  /** Resolves once every event queued so far is committed. */
  wait(): Promise<void> {
    if (this.#committed >= this.#queued) return Promise.resolve();
    const last = this.#waiters.at(-1);
    if (last?.target === this.#queued) return last.promise;
    const { promise, resolve, reject } = Promise.withResolvers<void>();
    this.#waiters.push({ target: this.#queued, resolve, reject, promise });
    return promise;
  }

  /** Rejects every waiter: their events will never be committed (the queue closed). */
  fail(error: RunnerError): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const waiter of waiters) waiter.reject(error);
  }
}
