/**
 * The embedded store's event write queue, a group commit: queued events are
 * written in one transaction at the next turn of the event loop (at once
 * when the queue is full), so every event queued while the previous commit
 * and the rest of that turn ran goes into one batch; there is no fixed
 * delay. A failed background write is retried with the events kept in
 * order, and {@linkcode EventQueue.durable} tells when the events queued so
 * far are committed.
 *
 * @module
 */

import { RunnerError } from "../errors.ts";
import { CommitWaiters } from "./commit_waiters.ts";

const RETRY_DELAY_MS = 1000;
const MAX_QUEUED_EVENTS = 256;

/** One run event awaiting its write, already serialised. */
export interface QueuedEvent {
  /** The run it belongs to. */
  runId: string;
  /** Its sequence number within the run. */
  sequence: number;
  /** The event type. */
  type: string;
  /** The whole stored event as JSON. */
  json: string;
  /** Milliseconds since the epoch. */
  timestamp: number;
}

/** Options of {@linkcode EventQueue}. */
export interface EventQueueOptions {
  /** Writes one batch (in one transaction); throws to keep the batch queued. */
  write(batch: QueuedEvent[]): void;
  /** Called when a background write fails (the events stay queued and are retried). */
  onFlushError(error: RunnerError): void;
}

/** Batches event writes: one commit per turn of the event loop, or at once past a size. */
export class EventQueue {
  readonly #options: EventQueueOptions;
  readonly #commits = new CommitWaiters();
  #queue: QueuedEvent[] = [];
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** A write failed: the next one waits for the retry, not for the next event. */
  #retrying = false;
  #closed = false;
  /** Set when the queue closed with events unwritten: every later wait fails with it. */
  #lost: RunnerError | undefined;

  /** Makes an empty queue that writes through `options.write`. */
  constructor(options: EventQueueOptions) {
    this.#options = options;
  }

  /** Queues `event` for the next commit (a failed write of a full queue is reported, not thrown). */
  push(event: QueuedEvent): void {
    this.#queue.push(event);
    this.#commits.queued();
    if (this.#retrying || this.#closed) return;
    if (this.#queue.length >= MAX_QUEUED_EVENTS) this.#writeInBackground();
    else this.#schedule(0);
  }

  /** Writes every queued event now; on failure they stay queued (and are retried) and the error is thrown. */
  flush(): void {
    if (this.#queue.length === 0) return;
    const batch = this.#queue;
    this.#queue = [];
    try {
      this.#options.write(batch);
    } catch (error) {
      this.#queue = [...batch, ...this.#queue];
      this.#retryLater();
      throw error;
    }
    this.#retrying = false;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#commits.committed(batch.length);
  }

  /**
   * Resolves once every event queued so far is committed, without a commit
   * of its own; waits through failed writes (they are retried) and rejects
   * only when the queue closes with them unwritten.
   */
  durable(): Promise<void> {
    if (this.#lost) return Promise.reject(this.#lost);
    return this.#commits.wait();
  }

  /** Stops background writes and retries (call after the last {@linkcode flush}). */
  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#queue.length) {
      this.#lost = new RunnerError(
        "store.unavailable",
        `The store closed with ${this.#queue.length} run events unwritten; nobody saw them and they are lost. Check that the store can be written (disk space, locks, the database) before the next start.`,
      );
      this.#commits.fail(this.#lost);
    }
  }

  #writeInBackground(): void {
    try {
      this.flush();
    } catch (error) {
      this.#options.onFlushError(error as RunnerError);
    }
  }

  #retryLater(): void {
    if (this.#closed) return;
    if (!this.#retrying) {
      this.#retrying = true;
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    this.#schedule(RETRY_DELAY_MS);
  }

  #schedule(delay: number): void {
    if (this.#timer !== undefined || this.#closed) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#writeInBackground();
    }, delay);
  }
}
