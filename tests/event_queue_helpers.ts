/**
 * Events for the store's event write queue.
 *
 * @module
 */

import type { QueuedEvent } from "../lib/store/event_queue.ts";

/** A queued `message.delta` of run "run" numbered `sequence` (its timestamp too). */
export function queuedEvent(sequence: number): QueuedEvent {
  return {
    runId: "run",
    sequence,
    type: "message.delta",
    json: `{"sequence":${sequence}}`,
    timestamp: sequence,
  };
}
