/**
 * Recording one run's events: redacted, stored (with the session mapping and
 * the run's outcome), then handed to the live listeners.
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
}

/** Records one run's events and fans them out to listeners. */
export interface RunRecorder {
  /** Redacts, stores and delivers an event to every listener. */
  emit(event: RunEvent): void;
  /**
   * Subscribes to events emitted from now on and, until
   * {@linkcode RunRecorder.stopReplay}, first hands over those emitted before.
   */
  subscribe(listener: (event: RunEvent) => void): () => void;
  /** Ends the replay of early events to new subscribers. */
  stopReplay(): void;
  /** Resolves once the store writes of every event emitted so far have settled. */
  settled(): Promise<void>;
}

/** Makes the recorder of one run. */
export function createRunRecorder(options: RunRecorderOptions): RunRecorder {
  const { runId, log } = options;
  const listeners = new Set<(event: RunEvent) => void>();
  let writes = Promise.resolve();
  // Events emitted before the starter could subscribe (a launch failing at once).
  let early: RunEvent[] | undefined = [];
  return {
    emit(raw) {
      const event = redactDeep(raw, options.secrets);
      // The run goes on for its live listeners even if the store fails.
      const logFailure = (error: unknown) =>
        log({
          msg: "storing a run event failed",
          run_id: runId,
          type: event.type,
          error: toRunnerError(error).message,
        });
      try {
        const stored = Promise.all(storeEvent(options, event)).then(
          () => {},
          logFailure,
        );
        writes = writes.then(() => stored);
      } catch (error) {
        logFailure(error);
      }
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
    },
    subscribe(listener) {
      for (const event of early ?? []) listener(event);
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    stopReplay() {
      early = undefined;
    },
    settled: () => writes,
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
  if (isTerminalEvent(event)) {
    writes.push(
      store.finishRun(runId, {
        status: event.type === "run.completed"
          ? "completed"
          : event.data.code === "run.cancelled"
          ? "cancelled"
          : "failed",
        code: event.data.code as string | undefined,
        error: event.data.error as string | undefined,
      }).then(() => store.flush()),
    );
  }
  return writes;
}
