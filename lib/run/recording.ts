/**
 * Recording one run's events: redacted, stored (with the session mapping and
 * the run's outcome), then handed to the live listeners — in the lean form
 * (`createLeanEvents`: no `all_content`, completions do not repeat text their
 * deltas carried).
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
}

/** Records one run's events and fans them out to listeners. */
export interface RunRecorder {
  /** Redacts, stores and delivers an event (lean) to every listener. */
  emit(event: RunEvent): void;
  /** Subscribes to events emitted from now on. */
  subscribe(listener: (event: RunEvent) => void): () => void;
}

/** Makes the recorder of one run. */
export function createRunRecorder(options: RunRecorderOptions): RunRecorder {
  const { runId, log } = options;
  const listeners = new Set<(event: RunEvent) => void>();
  const lean = createLeanEvents();
  return {
    emit(raw) {
      const event = lean(redactDeep(raw, options.secrets));
      try {
        storeEvent(options, event);
      } catch (error) {
        // The run goes on for its live listeners even if the store fails.
        log({
          msg: "storing a run event failed",
          run_id: runId,
          type: event.type,
          error: toRunnerError(error).message,
        });
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
  if (isTerminalEvent(event)) {
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
}
