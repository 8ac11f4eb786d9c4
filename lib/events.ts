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

/** The text of a `message.delta`. */
function deltaText(event: RunEvent): string {
  const content = deltaChunk(event)?.content;
  return typeof content === "string" ? content : "";
}

/** The `message` of a completion event, when it has one. */
function messageOf(
  event: RunEvent,
): { role?: unknown; content?: unknown; truncated?: unknown } | undefined {
  const message = event.data.message;
  return message && typeof message === "object"
    ? message as { role?: unknown; content?: unknown; truncated?: unknown }
    : undefined;
}

/**
 * A message's text as its deltas carried it, kept as those pieces: joining
 * them would copy the whole text once more only to compare it.
 */
class StreamedText {
  #pieces: string[] = [];
  #length = 0;

  /** Appends a delta's text. */
  push(piece: string): void {
    if (!piece) return;
    this.#pieces.push(piece);
    this.#length += piece.length;
  }

  /** Whether no text was streamed. */
  get empty(): boolean {
    return this.#length === 0;
  }

  /** Whether `text` is the streamed text (`whole`) or a beginning of it. */
  matches(text: string, whole: boolean): boolean {
    if (whole ? text.length !== this.#length : text.length > this.#length) {
      return false;
    }
    let offset = 0;
    for (const piece of this.#pieces) {
      if (offset >= text.length) break;
      const part = piece.length > text.length - offset
        ? piece.slice(0, text.length - offset)
        : piece;
      if (!text.startsWith(part, offset)) return false;
      offset += part.length;
    }
    return true;
  }
}

/**
 * Whether a completion's `message` is the streamed text: the same, or cut
 * short on the relay wire (`truncated`) from it.
 */
function messageIs(
  message: { content?: unknown; truncated?: unknown } | undefined,
  text: StreamedText,
): boolean {
  const content = message?.content;
  if (typeof content !== "string") return false;
  return text.matches(content, true) ||
    (message?.truncated === true && text.matches(content, false));
}

/** `event` without `all_content` on its chunk (other events as they are). */
function withoutAllContent(event: RunEvent): RunEvent {
  const chunk = deltaChunk(event);
  if (!chunk || !("all_content" in chunk)) return event;
  const { all_content: _, ...lean } = chunk;
  return { ...event, data: { ...event.data, chunk: lean } };
}

/**
 * Makes the lean (answer-once) form of one run's events, handed to it in
 * order from the first — what HTTP callers get who ask for it
 * (`completions=lean`, `docs/events.md`): deltas without `all_content`, and
 * a `message.completed` (or `run.completed`) whose text is exactly the text
 * its deltas already carried (or a relay frame's truncated prefix of it)
 * keeps only `message.role` (respectively drops `message`). Any completion
 * whose text differs from its deltas stays as it is.
 */
export function createLeanEvents(): (event: RunEvent) => RunEvent {
  let text = new StreamedText();
  let streamedAnswer: StreamedText | undefined;
  return (raw) => {
    const event = withoutAllContent(raw);
    if (event.type === "message.delta") {
      text.push(deltaText(event));
      return event;
    }
    const message = messageOf(event);
    if (event.type === "message.completed") {
      const streamed = !text.empty && messageIs(message, text);
      streamedAnswer = streamed ? text : undefined;
      text = new StreamedText();
      if (!streamed) return event;
      return {
        ...event,
        data: { ...event.data, message: { role: message!.role } },
      };
    }
    const lean = event.type === "run.completed" &&
      streamedAnswer !== undefined && messageIs(message, streamedAnswer);
    if (isTerminalEvent(event)) streamedAnswer = undefined;
    if (!lean) return event;
    const { message: _, ...rest } = event.data;
    return { ...event, data: rest };
  };
}

/**
 * Makes the full form of one run's events, handed to it in order from the
 * first: a completion that lacks its text, or whose text a relay frame cut
 * short (`truncated`, a prefix of its deltas), gets the whole text back from
 * its deltas (a `run.completed` without `message` stays so: the last
 * `message.completed` carried the answer); with `allContent` each `message.delta` carries
 * `all_content` (the message so far) while the message is under
 * {@linkcode ALL_CONTENT_LIMIT}, without it no delta does. The hub puts
 * daemons' events in this form; the relay wire, `runner run --json` and HTTP
 * callers that ask get `all_content` from it.
 */
export function createEventRestorer(
  options: { allContent: boolean },
): (event: RunEvent) => RunEvent {
  let text = "";
  let answer: string | undefined;
  return (event) => {
    const message = messageOf(event);
    switch (event.type) {
      case "message.delta": {
        text += deltaText(event);
        if (!options.allContent || text.length >= ALL_CONTENT_LIMIT) {
          return withoutAllContent(event);
        }
        const chunk = deltaChunk(event)!;
        return {
          ...event,
          data: { ...event.data, chunk: { ...chunk, all_content: text } },
        };
      }
      case "message.completed": {
        const whole = restoredText(message, text);
        text = "";
        answer = whole;
        if (message?.content === whole) return event;
        return {
          ...event,
          data: {
            ...event.data,
            message: wholeMessage(message, whole),
          },
        };
      }
      case "run.completed": {
        const whole = answer;
        answer = undefined;
        // No message: the last message.completed carried the answer already.
        if (whole === undefined || !message) return event;
        if (restoredText(message, whole) !== whole) return event;
        if (message?.content === whole) return event;
        return {
          ...event,
          data: { ...event.data, message: wholeMessage(message, whole) },
        };
      }
      default:
        if (isTerminalEvent(event)) answer = undefined;
        return event;
    }
  };
}

/**
 * A completion's whole text: its own, unless it has none or a relay frame cut
 * it to a prefix of `streamed` (then `streamed`).
 */
function restoredText(
  message: { content?: unknown; truncated?: unknown } | undefined,
  streamed: string,
): string {
  const content = message?.content;
  if (typeof content !== "string") return streamed;
  return message?.truncated === true && streamed.startsWith(content)
    ? streamed
    : content;
}

/** `message` (or a new assistant message) with `content`, not cut short. */
function wholeMessage(
  message: Record<string, unknown> | undefined,
  content: string,
): Record<string, unknown> {
  const { truncated: _, ...rest } = message ?? {};
  return { ...rest, role: rest.role ?? "assistant", content };
}

/** Every run event type, in the order of `docs/events.md`'s table. */
export const RUN_EVENT_TYPES: readonly string[] = [
  "run.started",
  "turn.started",
  "message.delta",
  "message.completed",
  "thought.delta",
  "tool.call.started",
  "tool.call.updated",
  "tool.call.completed",
  "plan.updated",
  "usage.updated",
  "permission.requested",
  "permission.unavailable",
  "permission.decided",
  "terminal.started",
  "terminal.output",
  "terminal.exited",
  "agent.update",
  "state.updated",
  "session.reset",
  "session.configured",
  "run.completed",
  "run.failed",
];
