/**
 * `all_content` on HTTP: deltas are stored and streamed without it; a caller
 * that asks (`?all_content=true`, or `"all_content": true` in a `POST
 * /v1/runs` body) gets it added back — the message so far while it is under
 * 64 KiB, as on the relay wire.
 *
 * @module
 */

import type { Context } from "hono";
import { createAllContentTracker, type RunEvent } from "../events.ts";
import { RunnerError } from "../errors.ts";
import type { RunStore } from "../store/types.ts";
import type { RunEventFollower } from "./stream.ts";

/** Whether the request asks for `all_content` (query first, then `bodyValue`). */
export function wantsAllContent(c: Context, bodyValue?: unknown): boolean {
  const value = c.req.query("all_content") ?? bodyValue;
  if (value === undefined || value === null) return false;
  if (typeof value === "boolean") return value;
  const text = String(value).toLowerCase();
  if (["true", "1", "yes", "on", ""].includes(text)) return true;
  if (["false", "0", "no", "off"].includes(text)) return false;
  throw new RunnerError(
    "http.bad_request",
    "all_content must be true or false.",
  );
}

/** `events` (a run's events from its first) with `all_content` on each delta. */
export function withAllContent(events: RunEvent[]): RunEvent[] {
  return events.map(createAllContentTracker());
}

/** Options for {@linkcode followWithAllContent}. */
export interface FollowWithAllContentOptions {
  /** The store holding the run's earlier events. */
  store: RunStore;
  /** The run. */
  runId: string;
  /** The follower starts after this sequence (the text before it counts too). */
  after?: number;
}

/** `follower` with `all_content` added to its deltas. */
export function followWithAllContent(
  follower: RunEventFollower,
  options: FollowWithAllContentOptions,
): RunEventFollower {
  const track = createAllContentTracker();
  const after = options.after ?? 0;
  if (after > 0) {
    for (const event of options.store.getEvents(options.runId)) {
      if ((event.sequence ?? 0) > after) break;
      track(event);
    }
  }
  return {
    next: async () => {
      const event = await follower.next();
      return event && track(event);
    },
    close: () => follower.close(),
  };
}
