/**
 * The asynchronous event write queue of a networked store, a group commit:
 * the events queued while one batch is being written become the next batch,
 * written as soon as that one is committed (no fixed delay), one batch at a
 * time and in order. A failed write keeps its events queued, and a failed
 * background write is reported and retried; {@linkcode BatchWriter.durable}
 * tells when the events queued so far are committed.
 *
 * @module
 */

import { RunnerError, toRunnerError } from "../../errors.ts";
import { CommitWaiters } from "../commit_waiters.ts";
import type { QueuedEvent } from "../event_queue.ts";

const RETRY_DELAY_MS = 1000;
const MAX_QUEUED_EVENTS = 256;

/** Options of {@linkcode BatchWriter}. */
export interface BatchWriterOptions {
  /** Writes one batch (in one transaction); rejects to keep the batch queued. */
  write(batch: QueuedEvent[]): Promise<void>;
  /** Called when a background write fails (the events stay queued and are retried). */
  onFlushError(error: RunnerError): void;
  /** Keep events queued until a flush or a full queue (for tests). */
  hold?: boolean;
}

/** Batches event writes, one batch at a time, in order. */
export class BatchWriter {
  readonly #options: BatchWriterOptions;
  readonly #commits = new CommitWaiters();
  #queue: QueuedEvent[] = [];
  #writing: Promise<void> = Promise.resolve();
  /** A background write is chained and has not taken its batch yet. */
  #backgroundQueued = false;
  #retryTimer: ReturnType<typeof setTimeout> | undefined;
  #closed = false;

  /** Makes an empty queue that writes through `options.write`. */
  constructor(options: BatchWriterOptions) {
    this.#options = options;
  }

  /** Queues `event`; it is written with the next batch. */
  push(event: QueuedEvent): void {
    this.#queue.push(event);
    this.#commits.queued();
    if (!this.#options.hold || this.#queue.length >= MAX_QUEUED_EVENTS) {
      this.#background();
    }
  }

  /** Writes every event queued so far; on failure they stay queued (and are retried) and the error is thrown. */
  flush(): Promise<void> {
    const written = this.#writing.then(() => this.#writeQueued());
    this.#writing = written.catch(() => this.#retryLater());
    return written;
  }

  /**
   * Resolves once every event queued so far is committed, without a write of
   * its own; waits through failed writes (they are retried) and rejects only
   * when the writer closes with them unwritten.
   */
  durable(): Promise<void> {
    return this.#commits.wait();
  }

  /** Stops background writes and retries (call after the last {@linkcode flush}). */
  close(): void {
    this.#closed = true;
    clearTimeout(this.#retryTimer);
    this.#retryTimer = undefined;
    if (this.#queue.length) {
      this.#commits.fail(
        new RunnerError(
          "store.unavailable",
          `The store closed with ${this.#queue.length} run events unwritten; nobody saw them and they are lost. Check that the store can be written (disk space, locks, the database) before the next start.`,
        ),
      );
    }
  }

  async #writeQueued(): Promise<void> {
    if (this.#queue.length === 0) return;
    const batch = this.#queue;
    this.#queue = [];
    try {
      await this.#options.write(batch);
    } catch (error) {
      this.#queue = [...batch, ...this.#queue];
      throw error;
    }
    clearTimeout(this.#retryTimer);
    this.#retryTimer = undefined;
    this.#commits.committed(batch.length);
  }

  /** Chains a write of the queue after the current one (unless one is chained or a retry waits). */
  #background(): void {
    if (
      this.#backgroundQueued || this.#retryTimer !== undefined || this.#closed
    ) return;
    this.#backgroundQueued = true;
    const written = this.#writing.then(() => {
      this.#backgroundQueued = false;
      return this.#writeQueued();
    });
    this.#writing = written.catch((error) => {
      this.#options.onFlushError(toRunnerError(error));
      this.#retryLater();
    });
  }

  #retryLater(): void {
    if (this.#closed || this.#retryTimer !== undefined) return;
    this.#retryTimer = setTimeout(() => {
      this.#retryTimer = undefined;
      this.#background();
    }, RETRY_DELAY_MS);
  }
}
