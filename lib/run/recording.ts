/**
 * Recording one run's events: redacted, stored (with the session mapping and
 * the run's outcome), then handed to the live listeners — in the lean form
 * (`createLeanEvents`: no `all_content`, completions do not repeat text their
 * deltas carried). Listeners get an event only once its batch is committed
 * (durable before visible), in order, so whatever a reader saw survives a
 * crash; while the store cannot write, events are withheld until it can. A
 * run records one terminal event; when storing its outcome fails (a full
 * disk), the final write is retried until the store takes it.
 *
 * @module
 */

import { toRunnerError } from "../errors.ts";
import type { RunEvent } from "../events.ts";
import { createLeanEvents, isTerminalEvent } from "../events.ts";
import { redactDeep } from "../secrets.ts";
import type { RunStore, SessionKey } from "../store/types.ts";

/** Options for {@linkcode createRunRecorder}. */
export interface RunRecorderOptions {
  /** The store (events, sessions, run outcomes). */
  store: RunStore;
  /** The run whose events are recorded. */
  runId: string;
  /** Where `external.acp_session_id` updates are stored, if anywhere. */
  sessionKey?: SessionKey;
  /** Values to redact from every event. */
  secrets: string[];
  /** Structured log. */
  log: (entry: Record<string, unknown>) => void;
  /** The first wait before the final write is retried, in ms (doubles up to 5 s). */
  finishRetryMs?: number;
}

const MAX_FINISH_RETRY_MS = 5_000;

/** Records one run's events and fans them out to listeners. */
export interface RunRecorder {
  /** Redacts and stores an event, and delivers it (lean) to every listener once it is durable. */
  emit(event: RunEvent): void;
  /**
   * Subscribes to events emitted from now on and, until
   * {@linkcode RunRecorder.stopReplay}, first hands over those emitted before.
   */
  subscribe(listener: (event: RunEvent) => void): () => void;
  /** Ends the replay of early events to new subscribers. */
  stopReplay(): void;
  /**
   * Resolves once every event emitted so far is delivered (so stored) and the
   * other store writes (session id, outcome) have settled.
   */
  settled(): Promise<void>;
}

/** Makes the recorder of one run. */
export function createRunRecorder(options: RunRecorderOptions): RunRecorder {
  const { runId, log } = options;
  const listeners = new Set<(event: RunEvent) => void>();
  let writes = Promise.resolve();
  // Events emitted before the starter could subscribe (a launch failing at once).
  let early: RunEvent[] | undefined = [];
  const lean = createLeanEvents();
  let terminal: RunEvent | undefined;
  const deliver = (event: RunEvent) => {
    early?.push(event);
    for (const listener of listeners) {
      try {
        listener(event);
      } catch (error) {
        log({
          msg: "event listener failed",
          run_id: runId,
          error: String(error),
        });
      }
    }
  };
  const publisher = createDurablePublisher(options, deliver);
  return {
    emit(raw) {
      if (terminal) {
        log({
          msg: "event after the terminal event dropped",
          level: "error",
          run_id: runId,
          type: raw.type,
        });
        return;
      }
      const event = lean(redactDeep(raw, options.secrets));
      if (isTerminalEvent(event)) terminal = event;
      const logFailure = (error: unknown) => {
        log({
          msg: "storing a run event failed",
          level: "error",
          run_id: runId,
          type: event.type,
          code: toRunnerError(error).code,
          error: toRunnerError(error).message,
        });
        if (terminal === event) retryFinish(options, event);
      };
      try {
        const stored = Promise.all(storeEvent(options, event)).then(
          () => {},
          logFailure,
        );
        writes = writes.then(() => stored);
      } catch (error) {
        logFailure(error);
      }
      publisher.publish(event);
    },
    subscribe(listener) {
      for (const event of early ?? []) listener(event);
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    stopReplay() {
      early = undefined;
    },
    settled: () => Promise.all([writes, publisher.idle()]).then(() => {}),
  };
}

/** Hands events to `deliver` in order, each once the store has committed it. */
interface DurablePublisher {
  /** Delivers `event` once it (and every event before it) is durable. */
  publish(event: RunEvent): void;
  /** Resolves once every event published so far is delivered (or given up). */
  idle(): Promise<void>;
}

/**
 * Waits for the store's commits on behalf of one run: one wait at a time,
 * covering every event queued when it began (a group commit takes them all,
 * so the next wait usually resolves at once).
 */
function createDurablePublisher(
  { store, runId, log }: RunRecorderOptions,
  deliver: (event: RunEvent) => void,
): DurablePublisher {
  const waiting: RunEvent[] = [];
  let busy = false;
  let idle = Promise.withResolvers<void>();
  idle.resolve();
  const wait = () => {
    busy = true;
    const count = waiting.length;
    const next = () => {
      busy = false;
      if (waiting.length) wait();
      else idle.resolve();
    };
    store.durable().then(() => {
      for (const event of waiting.splice(0, count)) deliver(event);
      next();
    }, (error) => {
      // The store closed with them unwritten: nobody ever sees them.
      const failure = toRunnerError(error);
      log({
        msg: "run events were never stored, so never shown",
        level: "error",
        run_id: runId,
        events: waiting.splice(0, count).length,
        code: failure.code,
        error: failure.message,
      });
      next();
    });
  };
  return {
    publish(event) {
      if (!busy && !waiting.length) idle = Promise.withResolvers<void>();
      waiting.push(event);
      if (!busy) wait();
    },
    idle: () => idle.promise,
  };
}

/**
 * Queues the event and starts storing a new agent session id and the outcome
 * of a terminal event; returns those writes (the store orders them).
 */
function storeEvent(
  { store, runId, sessionKey }: RunRecorderOptions,
  event: RunEvent,
): Promise<unknown>[] {
  const writes: Promise<unknown>[] = [];
  store.appendEvent(runId, event);
  if (
    event.type === "state.updated" && sessionKey &&
    event.data.key === "external.acp_session_id"
  ) {
    writes.push(store.putSession(sessionKey, String(event.data.value)));
  }
  if (isTerminalEvent(event)) writes.push(finishInStore(store, runId, event));
  return writes;
}

/** Writes the queued events and the run's outcome (the final flush). */
async function finishInStore(
  store: RunStore,
  runId: string,
  event: RunEvent,
): Promise<void> {
  await store.finishRun(runId, {
    status: event.type === "run.completed"
      ? "completed"
      : event.data.code === "run.cancelled"
      ? "cancelled"
      : "failed",
    code: event.data.code as string | undefined,
    error: event.data.error as string | undefined,
  });
  await store.flush();
}

/**
 * Retries the final flush (events and outcome) with growing waits until the
 * store takes it, or fails other than by being unavailable (e.g. closed).
 */
function retryFinish(options: RunRecorderOptions, event: RunEvent): void {
  const { store, runId, log } = options;
  let waitMs = options.finishRetryMs ?? 250;
  const attempt = async () => {
    try {
      await finishInStore(store, runId, event);
      log({ msg: "run outcome stored after retrying", run_id: runId });
    } catch (error) {
      const failure = toRunnerError(error);
      log({
        msg: "storing the run outcome failed",
        level: "error",
        run_id: runId,
        code: failure.code,
        error: failure.message,
        retry: failure.code === "store.unavailable",
      });
      if (failure.code !== "store.unavailable") return;
      waitMs = Math.min(waitMs * 2, MAX_FINISH_RETRY_MS);
      setTimeout(attempt, waitMs);
    }
  };
  setTimeout(attempt, waitMs);
}
