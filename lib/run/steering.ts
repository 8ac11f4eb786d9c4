/**
 * The steering rule every run keeps, the engine's and a daemon run's on the
 * hub: a follow-up is queued for the run's next turn (or job) while the run
 * is open, belongs to a conversation and has room. See `docs/runs.md`.
 *
 * @module
 */

import type { RunInput } from "./prompt.ts";

/** What happened to a follow-up offered to a run. */
export type SteerOutcome = "queued" | "closed" | "full";

/** Follow-ups a run holds at most. */
export const STEERING_QUEUE_LIMIT = 100;

/** Queues a follow-up unless the run has closed, has no conversation, or its queue is full. */
export function offerFollowUp(
  run: { readonly closed: boolean; readonly queue: RunInput[] },
  conversationId: string | undefined,
  input: RunInput,
): SteerOutcome {
  if (run.closed || !conversationId) return "closed";
  if (run.queue.length >= STEERING_QUEUE_LIMIT) return "full";
  run.queue.push(input);
  return "queued";
}
