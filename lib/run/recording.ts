/**
 * Recording one run's events: redacted, stored (with the session mapping and
 * the run's outcome), then handed to the live listeners. A run records one
 * terminal event; when storing its outcome fails (a full disk), the final
 * write is retried until the store takes it.
 *
 * @module
 */

import { toRunnerError } from "../errors.ts";
import type { RunEvent } from "../events.ts";
import { isTerminalEvent } from "../events.ts";
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
  /** Redacts, stores and delivers an event to every listener. */
  emit(event: RunEvent): void;
  /** Subscribes to events emitted from now on. */
  subscribe(listener: (event: RunEvent) => void): () => void;
}

/** Makes the recorder of one run. */
export function createRunRecorder(options: RunRecorderOptions): RunRecorder {
  const { runId, log } = options;
  const listeners = new Set<(event: RunEvent) => void>();
  let terminal: RunEvent | undefined;
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
      const event = redactDeep(raw, options.secrets);
      if (isTerminalEvent(event)) terminal = event;
      try {
        storeEvent(options, event);
      } catch (error) {
        // The run goes on for its live listeners even if the store fails.
        log({
          msg: "storing a run event failed",
          level: "error",
          run_id: runId,
          type: event.type,
          code: toRunnerError(error).code,
          error: toRunnerError(error).message,
        });
        if (terminal === event) retryFinish(options, event);
      }
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
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}

/** Stores the event, a new agent session id, and the outcome of a terminal event. */
function storeEvent(
  { store, runId, sessionKey }: RunRecorderOptions,
  event: RunEvent,
): void {
  store.appendEvent(runId, event);
  if (
    event.type === "state.updated" && sessionKey &&
    event.data.key === "external.acp_session_id"
  ) {
    store.putSession(sessionKey, String(event.data.value));
  }
  if (isTerminalEvent(event)) finishInStore(store, runId, event);
}

/** Writes the queued events and the run's outcome (the final flush). */
function finishInStore(store: RunStore, runId: string, event: RunEvent): void {
  store.finishRun(runId, {
    status: event.type === "run.completed"
      ? "completed"
      : event.data.code === "run.cancelled"
      ? "cancelled"
      : "failed",
    code: event.data.code as string | undefined,
    error: event.data.error as string | undefined,
  });
  store.flush();
}

/**
 * Retries the final flush (events and outcome) with growing waits until the
 * store takes it, or fails other than by being unavailable (e.g. closed).
 */
function retryFinish(options: RunRecorderOptions, event: RunEvent): void {
  const { store, runId, log } = options;
  let waitMs = options.finishRetryMs ?? 250;
  const attempt = () => {
    try {
      finishInStore(store, runId, event);
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
