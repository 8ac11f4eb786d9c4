/**
 * What HTTP answers carry. The event log keeps events lean (deltas without
 * `all_content`; a completion does not repeat text its deltas carried), and
 * SSE, NDJSON and JSON answers hand them out as stored — so live and
 * replayed streams agree. A caller that asks (`?all_content=true`, or
 * `"all_content": true` in a `POST /v1/runs` body) gets the full form, as on
 * the relay wire: `all_content` on deltas (the message so far while it is
 * under 64 KiB) and the text on both completions.
 *
 * @module
 */

import type { Context } from "hono";
import { createEventRestorer, type RunEvent } from "../events.ts";
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

/** A run's events (from its first), in the full form when `allContent`. */
export function shapeEvents(
  events: RunEvent[],
  allContent: boolean,
): RunEvent[] {
  return allContent ? events.map(createEventRestorer({ allContent })) : events;
}

/** Options for {@linkcode shapeStream}. */
export interface ShapeStreamOptions {
  /** The store holding the run's earlier events. */
  store: RunStore;
  /** The run. */
  runId: string;
  /** The follower starts after this sequence (the events before it count too). */
  after?: number;
  /** The full form instead of the stored, lean one. */
  allContent: boolean;
}

/** `follower`'s events as stored, or in the full form when asked. */
export function shapeStream(
  follower: RunEventFollower,
  options: ShapeStreamOptions,
): RunEventFollower {
  if (!options.allContent) return follower;
  const restore = createEventRestorer({ allContent: true });
  const after = options.after ?? 0;
  // The restorer first sees the events before `after` (their text counts too).
  let primed: Promise<void> | undefined;
  const prime = async () => {
    if (after <= 0) return;
    for (const event of await options.store.getEvents(options.runId)) {
      if ((event.sequence ?? 0) > after) break;
      restore(event);
    }
  };
  return {
    next: async () => {
      await (primed ??= prime());
      const event = await follower.next();
      return event && restore(event);
    },
    close: () => follower.close(),
  };
}

/** The final assistant message of a run's events (lean or full, from the first). */
export function finalMessage(stored: RunEvent[]): string {
  const events = stored.map(createEventRestorer({ allContent: false }));
  for (let index = events.length - 1; index >= 0; index--) {
    const event = events[index];
    if (event.type === "run.completed" || event.type === "message.completed") {
      const message = event.data.message as { content?: unknown } | undefined;
      if (typeof message?.content === "string") return message.content;
    }
  }
  return "";
}
