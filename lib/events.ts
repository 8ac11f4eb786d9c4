/**
 * Run events: the shapes of coding-relay-v1's `RunnerResult`, shared by the
 * CLI, the HTTP API and the daemon relay. See `docs/events.md`.
 *
 * @module
 */

/** Token usage reported by the agent (`usage_update`). */
export interface RunUsage {
  /** Tokens in context. */
  used?: number;
  /** Context window size. */
  size?: number;
  /** Cost, when the agent reports it. */
  cost?: { amount: number; currency: string } | null;
}

/** One run event, as streamed to callers and stored in the event log. */
export interface RunEvent {
  /** The run this event belongs to. */
  run_id: string;
  /** The event type (`message.delta`, `run.completed`, …). */
  type: string;
  /** The type's payload. */
  data: Record<string, unknown>;
  /** Usage, on `run.completed`. */
  usage?: RunUsage;
  /** Position in the run's event stream, from 1. */
  sequence?: number;
  /** Milliseconds since the epoch. */
  timestamp?: number;
}

/** Event types that end a run; exactly one is emitted per run. */
export const TERMINAL_EVENT_TYPES: ReadonlySet<string> = new Set([
  "run.completed",
  "run.failed",
]);

/** Whether `event` ends its run. */
export function isTerminalEvent(event: Pick<RunEvent, "type">): boolean {
  return TERMINAL_EVENT_TYPES.has(event.type);
}

/** Receives a run's events in order. */
export type EventSink = (event: RunEvent) => void;

/**
 * `all_content` rides on a `message.delta` only while the message so far is
 * shorter than this many characters (UTF-16 units, as JavaScript counts).
 */
export const ALL_CONTENT_LIMIT = 64 * 1024;

/** The `chunk` of a `message.delta`, when the event is one. */
function deltaChunk(event: RunEvent): Record<string, unknown> | undefined {
  if (event.type !== "message.delta") return undefined;
  const chunk = event.data.chunk;
  return chunk && typeof chunk === "object" && !Array.isArray(chunk)
    ? chunk as Record<string, unknown>
    : undefined;
}

/**
 * Returns `event` without `all_content` (the event log and HTTP streams keep
 * deltas lean); other events are returned as they are.
 */
export function withoutAllContent(event: RunEvent): RunEvent {
  const chunk = deltaChunk(event);
  if (!chunk || !("all_content" in chunk)) return event;
  const { all_content: _, ...lean } = chunk;
  return { ...event, data: { ...event.data, chunk: lean } };
}

/**
 * Makes a function that adds `all_content` (the message so far) to each
 * `message.delta` of one run's events, handed to it in order, while the
 * message is under {@linkcode ALL_CONTENT_LIMIT}. Each `message.completed`
 * starts a new message. For consumers that need it: the relay wire (the
 * Python hub builds `RunnerResult` from it), `runner run --json`, and HTTP
 * callers that ask for it.
 */
export function createAllContentTracker(): (event: RunEvent) => RunEvent {
  let text = "";
  let over = false;
  return (event) => {
    if (event.type === "message.completed" || isTerminalEvent(event)) {
      text = "";
      over = false;
      return event;
    }
    const chunk = deltaChunk(event);
    if (!chunk || typeof chunk.content !== "string") return event;
    if (!over) {
      text += chunk.content;
      over = text.length >= ALL_CONTENT_LIMIT;
      if (over) text = "";
    }
    if (over) return withoutAllContent(event);
    return {
      ...event,
      data: { ...event.data, chunk: { ...chunk, all_content: text } },
    };
  };
}
