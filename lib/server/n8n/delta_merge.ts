/**
 * Fewer, larger deltas for a consumer that pays per item (the n8n stream):
 * `message.delta`s that follow within a window of the last merged one are
 * joined into one. Nothing else is delayed or reordered.
 *
 * @module
 */

import type { RunEvent } from "../../events.ts";
import { settleWithin } from "../../timing.ts";
import type { RunEventFollower } from "../stream.ts";

/** The text of a `message.delta`. */
function deltaContent(event: RunEvent): string {
  const chunk = event.data.chunk as { content?: unknown } | undefined;
  return typeof chunk?.content === "string" ? chunk.content : "";
}

/** One delta with `later`'s text appended (and its sequence numbers). */
function joinDeltas(first: RunEvent, later: RunEvent): RunEvent {
  const chunk = later.data.chunk as Record<string, unknown>;
  const { all_content: _, ...rest } = chunk;
  return {
    ...later,
    data: {
      ...later.data,
      chunk: { ...rest, content: deltaContent(first) + deltaContent(later) },
    },
  };
}

/**
 * A follower whose `message.delta`s are merged: a delta that comes after a
 * quiet `windowMs` is returned at once; deltas arriving within `windowMs` of
 * the last returned one are joined until the window closes or another kind
 * of event arrives. `windowMs` 0 passes every event through as it is.
 */
export function mergeDeltas(
  follower: RunEventFollower,
  windowMs: number,
): RunEventFollower {
  // A next() still running when a window closed; its event comes first.
  let carried: Promise<RunEvent | undefined> | undefined;
  let lastDeltaAt = -Infinity;
  const take = () => {
    const upcoming = carried ?? follower.next();
    carried = undefined;
    return upcoming;
  };
  return {
    async next() {
      const first = await take();
      if (!first || first.type !== "message.delta" || windowMs <= 0) {
        return first;
      }
      let merged = first;
      const deadline = lastDeltaAt + windowMs;
      for (let left = deadline - performance.now(); left > 0;) {
        const upcoming = take();
        if (!await settleWithin(upcoming, left)) {
          carried = upcoming;
          break;
        }
        const event = await upcoming;
        if (event?.type !== "message.delta") {
          carried = upcoming;
          break;
        }
        merged = joinDeltas(merged, event);
        left = deadline - performance.now();
      }
      lastDeltaAt = performance.now();
      return merged;
    },
    close: () => follower.close(),
  };
}
