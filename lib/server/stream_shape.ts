/**
 * What HTTP answers carry. The event log keeps events as the engine made
 * them: deltas without `all_content`, both completions with the whole text
 * (`docs/events.md`, "Lean and full forms"). SSE, NDJSON and JSON answers
 * hand them out as stored — so live and replayed streams agree, and the text
 * is built once per completion, not per reader. A caller may ask for one of
 * two other forms (query first, then the `POST /v1/runs` body):
 * `all_content=true` adds `all_content` to deltas (the message so far while
 * it is under 64 KiB), as on the relay wire; `completions=lean` leaves out
 * of each completion the text its deltas already carried (the answer once).
 *
 * @module
 */

import type { Context } from "hono";
import {
  createEventRestorer,
  createLeanEvents,
  type RunEvent,
} from "../events.ts";
import { RunnerError } from "../errors.ts";
import type { RunStore } from "../store/types.ts";
import type { RunEventFollower } from "./stream.ts";

/** The form a caller asked its events in. */
export interface EventShape {
  /** `all_content` on deltas (`all_content=true`). */
  allContent: boolean;
  /** Completions without the text their deltas carried (`completions=lean`). */
  leanCompletions: boolean;
}

/** Whether the request asks for `all_content` (query first, then `bodyValue`). */
function wantsAllContent(c: Context, bodyValue?: unknown): boolean {
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

/** Whether the request asks for lean completions (query first, then `bodyValue`). */
function wantsLeanCompletions(c: Context, bodyValue?: unknown): boolean {
  const value = c.req.query("completions") ?? bodyValue;
  if (value === undefined || value === null) return false;
  const text = String(value).toLowerCase();
  if (text === "full") return false;
  if (text === "lean") return true;
  throw new RunnerError(
    "http.bad_request",
    "completions must be full (the default: completions carry the whole text) or lean (the text only in deltas).",
  );
}

/**
 * The form the request asks for: `?all_content=` and `?completions=`, else
 * the `all_content` and `completions` of `body` (a `POST /v1/runs` body).
 */
export function requestedShape(
  c: Context,
  body?: { all_content?: unknown; completions?: unknown },
): EventShape {
  const shape = {
    allContent: wantsAllContent(c, body?.all_content),
    leanCompletions: wantsLeanCompletions(c, body?.completions),
  };
  if (shape.allContent && shape.leanCompletions) {
    throw new RunnerError(
      "http.bad_request",
      "all_content=true repeats the answer on every delta and completions=lean leaves it out of completions: ask for one of them.",
    );
  }
  return shape;
}

/** The stage that turns stored events into `shape`, or undefined for as stored. */
function shaper(
  shape: EventShape,
): ((event: RunEvent) => RunEvent) | undefined {
  if (shape.allContent) return createEventRestorer({ allContent: true });
  if (shape.leanCompletions) return createLeanEvents();
  return undefined;
}

/** A run's events (from its first) in `shape`. */
export function shapeEvents(events: RunEvent[], shape: EventShape): RunEvent[] {
  const stage = shaper(shape);
  return stage ? events.map(stage) : events;
}

/** Options for {@linkcode shapeStream}. */
export interface ShapeStreamOptions {
  /** The store holding the run's earlier events. */
  store: RunStore;
  /** The run. */
  runId: string;
  /** The follower starts after this sequence (the events before it count too). */
  after?: number;
  /** The form asked for. */
  shape: EventShape;
}

/** `follower`'s events as stored, or in the form asked for. */
export function shapeStream(
  follower: RunEventFollower,
  options: ShapeStreamOptions,
): RunEventFollower {
  const stage = shaper(options.shape);
  if (!stage) return follower;
  const after = options.after ?? 0;
  // The stage first sees the events before `after` (their text counts too).
  let primed: Promise<void> | undefined;
  const prime = async () => {
    if (after <= 0) return;
    for (const event of await options.store.getEvents(options.runId)) {
      if ((event.sequence ?? 0) > after) break;
      stage(event);
    }
  };
  return {
    next: async () => {
      await (primed ??= prime());
      const event = await follower.next();
      return event && stage(event);
    },
    close: () => follower.close(),
  };
}

function isCompletion(event: RunEvent): boolean {
  return event.type === "run.completed" || event.type === "message.completed";
}

/** A completion's text, when it carries it whole. */
function completionText(event: RunEvent): string | undefined {
  const message = event.data.message as
    | { content?: unknown; truncated?: unknown }
    | undefined;
  return typeof message?.content === "string" && message.truncated !== true
    ? message.content
    : undefined;
}

/**
 * The final assistant message of a run's events (from the first): the last
 * completion's text, or — for events in the lean form (asked for, or
 * recorded so by an earlier version) — the text put back from the deltas.
 */
export function finalMessage(events: RunEvent[]): string {
  const last = events.findLast(isCompletion);
  const text = last && completionText(last);
  if (text !== undefined) return text;
  const restored = events.map(createEventRestorer({ allContent: false }));
  const completion = restored.findLast((event) =>
    isCompletion(event) && completionText(event) !== undefined
  );
  return (completion && completionText(completion)) ?? "";
}
