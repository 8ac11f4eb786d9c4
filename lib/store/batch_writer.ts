/**
 * The asynchronous event write queue of a networked store: events are held
 * briefly and written in one batch (at once when the queue is full), one
 * batch at a time and in order; a failed write keeps its events queued and
 * a failed background write is reported and retried.
 *
 * @module
 */

import { type RunnerError, toRunnerError } from "../errors.ts";
import type { QueuedEvent } from "./event_queue.ts";

const RETRY_DELAY_MS = 1000;
const MAX_QUEUED_EVENTS = 256;

/** Options of {@linkcode BatchWriter}. */
export interface BatchWriterOptions {
  /** Writes one batch (in one transaction); rejects to keep the batch queued. */
  write(batch: QueuedEvent[]): Promise<void>;
  /** Called when a background write fails (the events stay queued and are retried). */
  onFlushError(error: RunnerError): void;
  /** How long an event waits for its batch; undefined: until a flush or a full queue. */
  delayMs?: number;
}

/** Batches event writes, one batch at a time, in order. */
export class BatchWriter {
  readonly #options: BatchWriterOptions;
  #queue: QueuedEvent[] = [];
  #inFlight: QueuedEvent[] = [];
  #writing: Promise<void> = Promise.resolve();
  #timer: ReturnType<typeof setTimeout> | undefined;
  #closed = false;

  /** Makes an empty queue that writes through `options.write`. */
  constructor(options: BatchWriterOptions) {
    this.#options = options;
  }

  /** Queues `event`; a full queue starts its write at once. */
  push(event: QueuedEvent): void {
    this.#queue.push(event);
    if (this.#queue.length >= MAX_QUEUED_EVENTS) {
      this.#background();
    } else if (this.#options.delayMs !== undefined) {
      this.#schedule(this.#options.delayMs);
    }
  }

  /** Writes every event queued so far; on failure they stay queued and the error is thrown. */
  flush(): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const written = this.#writing.then(() => this.#writeQueued());
    this.#writing = written.catch(() => {});
    return written;
  }

  /** The events of `runId` still waiting for their write (or being written), in order. */
  pendingFor(runId: string): QueuedEvent[] {
    return [...this.#inFlight, ...this.#queue].filter((event) =>
      event.runId === runId
    );
  }

  /** Forgets the queued events of `runId` (a run the store may no longer write). */
  drop(runId: string): void {
    this.#queue = this.#queue.filter((event) => event.runId !== runId);
  }

  /** Stops background writes and retries (call after the last {@linkcode flush}). */
  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  async #writeQueued(): Promise<void> {
    if (this.#queue.length === 0) return;
    const batch = this.#queue;
    this.#queue = [];
    this.#inFlight = batch;
    try {
      await this.#options.write(batch);
    } catch (error) {
      this.#queue = [...batch, ...this.#queue];
      throw error;
    } finally {
      this.#inFlight = [];
    }
  }

  #background(): void {
    this.flush().catch((error) => {
      this.#options.onFlushError(toRunnerError(error));
      if (!this.#closed) this.#schedule(RETRY_DELAY_MS);
    });
  }

  #schedule(delay: number): void {
    if (this.#timer !== undefined || this.#closed) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#background();
    }, delay);
  }
}
