/**
 * The asynchronous {@linkcode RunStore} over a synchronous one (the embedded
 * SQLite store): every call still runs at once, when it is made, and its
 * result or failure is handed back as a settled promise, so the embedded
 * store behaves exactly as it did before the interface became asynchronous.
 *
 * @module
 */

import type { RunStore, SyncRunStore } from "../types.ts";

/** Settles with what `body` returns or throws, after running it now. */
function settled<T>(body: () => T): Promise<T> {
  try {
    return Promise.resolve(body());
  } catch (error) {
    return Promise.reject(error);
  }
}

/** Wraps a synchronous store in the asynchronous interface. */
export function asyncRunStore(store: SyncRunStore): RunStore {
  return {
    getSession: (key) => settled(() => store.getSession(key)),
    putSession: (key, sessionId) =>
      settled(() => store.putSession(key, sessionId)),
    putSessionSettings: (key, settings) =>
      settled(() => store.putSessionSettings(key, settings)),
    putSessionCost: (key, sessionCost) =>
      settled(() => store.putSessionCost(key, sessionCost)),
    deleteSessions: (id) => settled(() => store.deleteSessions(id)),
    listSessions: (id) => settled(() => store.listSessions(id)),
    createRun: (run) => settled(() => store.createRun(run)),
    finishRun: (runId, outcome) =>
      settled(() => store.finishRun(runId, outcome)),
    importRuns: (runs) => settled(() => store.importRuns(runs)),
    getRun: (runId) => settled(() => store.getRun(runId)),
    listRuns: (options) => settled(() => store.listRuns(options)),
    appendEvent: (runId, event) => store.appendEvent(runId, event),
    flush: () => settled(() => store.flush()),
    durable: () => store.durable(),
    getEvents: (runId, options) =>
      settled(() => store.getEvents(runId, options)),
    markActiveRunsFailed: (code, message, options) =>
      settled(() => store.markActiveRunsFailed(code, message, options)),
    pruneRuns: (options) => settled(() => store.pruneRuns(options)),
    size: () => settled(() => store.size()),
    health: () => settled(() => store.health()),
    close: () => settled(() => store.close()),
  };
}
