/**
 * The runs a manager has in flight, by run id and by conversation: at most one
 * active run per conversation, which takes the conversation's follow-ups
 * (steering) until it ends.
 *
 * @module
 */

import { RunnerError } from "../errors.ts";
import type { RunEvent } from "../events.ts";
import type { RunHandle, RunResult } from "./engine.ts";
import type { RunRequest } from "./request.ts";

/** An active run as the manager tracks it. */
export interface ManagedRun {
  /** The run id. */
  runId: string;
  /** The conversation. */
  conversationId?: string;
  /** The engine handle. */
  handle: RunHandle;
  /** Subscribes to events (past ones are in the store). */
  subscribe(listener: (event: RunEvent) => void): () => void;
  /** Resolves when the run has ended and its outcome is stored. */
  done: Promise<RunResult>;
}

/** The runs a manager has in flight, by run id and by conversation. */
export interface ActiveRuns {
  /** Every active run. */
  byId: Map<string, ManagedRun>;
  /** The active run of each conversation. */
  byConversation: Map<string, ManagedRun>;
  /** Ids of runs admitted but not yet tracked (their store writes are under way). */
  starting: Set<string>;
}

/**
 * Queues the input on the conversation's active run; returns that run, or
 * undefined when there is none or it no longer takes follow-ups.
 */
export function steerActiveRun(
  request: RunRequest,
  active: ActiveRuns,
): ManagedRun | undefined {
  const conversationId = request.conversationId;
  if (!conversationId) return undefined;
  const run = active.byConversation.get(conversationId);
  if (!run) return undefined;
  const outcome = run.handle.steer(request.input);
  if (outcome === "queued") return run;
  if (outcome === "full") {
    throw new RunnerError(
      "run.steering_queue_full",
      "This conversation's run already holds 100 queued follow-ups. Wait for it to finish.",
    );
  }
  return undefined;
}

/** Adds a started run to the active runs until it has ended. */
export function trackRun(
  active: ActiveRuns,
  run: Omit<ManagedRun, "done">,
): ManagedRun {
  const { runId, conversationId } = run;
  const managed: ManagedRun = {
    ...run,
    done: run.handle.done.then((result) => {
      active.byId.delete(runId);
      if (
        conversationId && active.byConversation.get(conversationId) === managed
      ) {
        active.byConversation.delete(conversationId);
      }
      return result;
    }),
  };
  active.byId.set(runId, managed);
  if (conversationId) active.byConversation.set(conversationId, managed);
  return managed;
}
