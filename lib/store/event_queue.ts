/**
 * The store's event write queue: events are held briefly and written in one
 * batch, at once when the queue is full, and a failed background write is
 * retried with the events kept in order.
 *
 * @module
 */

import type { RunnerError } from "../errors.ts";

const FLUSH_DELAY_MS = 25;
const FLUSH_RETRY_DELAY_MS = 1000;
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

/** Batches event writes: written shortly after queueing, or at once past a size. */
export class EventQueue {
  readonly #options: EventQueueOptions;
  #queue: QueuedEvent[] = [];
  #flushTimer: ReturnType<typeof setTimeout> | undefined;
  #closed = false;

  /** Makes an empty queue that writes through `options.write`. */
  constructor(options: EventQueueOptions) {
    this.#options = options;
  }

  /** Queues `event`; writes the queue at once when it is full (and throws what that write throws). */
  push(event: QueuedEvent): void {
    this.#queue.push(event);
    if (this.#queue.length >= MAX_QUEUED_EVENTS) {
      this.flush();
    } else {
      this.#scheduleFlush(FLUSH_DELAY_MS);
    }
  }

  /** Writes every queued event now; on failure they stay queued and the error is thrown. */
  flush(): void {
    if (this.#flushTimer !== undefined) {
      clearTimeout(this.#flushTimer);
      this.#flushTimer = undefined;
    }
    if (this.#queue.length === 0) return;
    const batch = this.#queue;
    this.#queue = [];
    try {
      this.#options.write(batch);
    } catch (error) {
      this.#queue = [...batch, ...this.#queue];
      throw error;
    }
  }

  /** The events of `runId` still waiting for their write, in order. */
  pendingFor(runId: string): QueuedEvent[] {
    return this.#queue.filter((event) => event.runId === runId);
  }

  /** Stops background writes and retries (call after the last {@linkcode flush}). */
  close(): void {
    this.#closed = true;
    clearTimeout(this.#flushTimer);
    this.#flushTimer = undefined;
  }

  #scheduleFlush(delay: number): void {
    if (this.#flushTimer !== undefined) return;
    this.#flushTimer = setTimeout(() => {
      this.#flushTimer = undefined;
      try {
        this.flush();
      } catch (error) {
        this.#options.onFlushError(error as RunnerError);
        if (!this.#closed) this.#scheduleFlush(FLUSH_RETRY_DELAY_MS);
      }
    }, delay);
  }
}
