/**
 * Fits one run event into `run.event` frames under the daemon→hub frame
 * limit: a large `message.delta` is split into several deltas, any other
 * oversized event is truncated. See `docs/relay.md`.
 *
 * @module
 */

import {
  encodeDaemonFrame,
  type JsonObject,
  MAX_FRAME_BYTES,
} from "../relay.ts";
import { escapedUnitBytes, truncateToFit } from "./json.ts";

function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Room kept for moving a `truncated` flag into the runner details. */
const LIFT_RESERVE_BYTES = 48;

/**
 * Moves the `truncated` flags that cutting left on the payload, its message
 * or its chunk (objects LangBot's model closes) into the runner details.
 */
function liftTruncatedFlags(
  data: JsonObject,
  details: JsonObject | undefined,
): JsonObject | undefined {
  let cut = false;
  for (const holder of [data, data.message, data.chunk]) {
    if (isObject(holder) && holder.truncated === true) {
      delete holder.truncated;
      cut = true;
    }
  }
  if (!cut) return details;
  const kept = isObject(details?.data) ? details.data : {};
  return { ...details, data: { ...kept, truncated: true } };
}

/**
 * Encodes `run.event` frames for `event`, splitting a `message.delta` whose
 * frame would exceed `maxBytes` into several deltas carrying consecutive pieces
 * of `content`. `all_content` becomes the matching running prefix, or is left
 * out when it alone would not fit; only the last piece keeps a true
 * `is_final`. Any other event over the limit (or a delta that cannot be split)
 * has the largest strings of its `data` cut, each with `"truncated": true`
 * next to it, so that it fits one frame; only an event that cannot be made to
 * fit that way comes back oversized. `runner` (the runner's details of the
 * event, `relay/wire_events.ts`) rides on every frame.
 */
export function encodeEventFrames(
  jobId: string,
  event: JsonObject,
  maxBytes: number = MAX_FRAME_BYTES,
  runner?: JsonObject,
): string[] {
  let details = runner;
  const encode = (item: JsonObject) =>
    encodeDaemonFrame({
      type: "run.event",
      job_id: jobId,
      event: item,
      ...(details ? { runner: details } : {}),
    });
  const bytes = (text: string) => new TextEncoder().encode(text).length;
  const whole = encode(event);
  if (bytes(whole) <= maxBytes) return [whole];
  const data = isObject(event.data) ? event.data : undefined;
  const chunk = data && isObject(data.chunk) ? data.chunk : undefined;
  const truncated = () => {
    if (!data) return [whole];
    const copy: JsonObject = { ...event, data: structuredClone(data) };
    details = details ? structuredClone(details) : undefined;
    // The flags' move into the runner details may add a few bytes.
    const excess = () => bytes(encode(copy)) - maxBytes + LIFT_RESERVE_BYTES;
    const fits = truncateToFit(copy.data as JsonObject, excess);
    if (!fits && isObject(details?.data)) truncateToFit(details.data, excess);
    details = liftTruncatedFlags(copy.data as JsonObject, details);
    return [encode(copy)];
  };
  if (
    event.type !== "message.delta" || !data || !chunk ||
    typeof chunk.content !== "string" || chunk.content === ""
  ) {
    return truncated();
  }
  const content = chunk.content;
  const allContent = typeof chunk.all_content === "string"
    ? chunk.all_content
    : undefined;
  // all_content can track the pieces only when it ends with this delta's content.
  let allBase = allContent !== undefined && allContent.endsWith(content)
    ? allContent.slice(0, allContent.length - content.length)
    : undefined;
  const pieceOf = (start: number, end: number, last: boolean): JsonObject => {
    const next: JsonObject = { ...chunk, content: content.slice(start, end) };
    if (allBase !== undefined) {
      next.all_content = allBase + content.slice(0, end);
    } else delete next.all_content;
    if (!last && "is_final" in next) next.is_final = false;
    return { ...event, data: { ...data, chunk: next } };
  };
  const frames: string[] = [];
  let start = 0;
  while (start < content.length) {
    let room = maxBytes - bytes(encode(pieceOf(start, start, false)));
    if (room < 16 && allBase !== undefined) {
      allBase = undefined; // the running text alone no longer fits a frame
      room = maxBytes - bytes(encode(pieceOf(start, start, false)));
    }
    if (room < 16) return truncated(); // the rest of the event alone is too large
    const perUnit = allBase === undefined ? 1 : 2;
    let end = start;
    while (end < content.length) {
      const cost = escapedUnitBytes(content.charCodeAt(end)) * perUnit;
      if (cost > room) break;
      room -= cost;
      end += 1;
    }
    const lastCode = content.charCodeAt(end - 1);
    if (end < content.length && lastCode >= 0xd800 && lastCode <= 0xdbff) {
      end -= 1; // never split a surrogate pair
    }
    frames.push(encode(pieceOf(start, end, end >= content.length)));
    start = end;
  }
  return frames;
}
