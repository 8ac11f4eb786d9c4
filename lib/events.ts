/**
 * Run events: the shapes of coding-relay-v1's `RunnerResult`, shared by the
 * CLI, the HTTP API and the daemon relay. See `docs/events.md`.
 *
 * @module
 */

// Token usage in LangBot's names (`LLMTokenUsage`): what ACP's
// `PromptResponse.usage` of each turn says, added up over a run's turns, with
// the context window and cost of the last `usage_update` beside it. Missing
// means unknown: nothing reported gives no usage, never zeros.

/** A cost as the agent reports it (ACP `Cost`). */
export interface UsageCost {
  /** The amount, in `currency`. */
  amount: number;
  /** An ISO 4217 code, or another unit such as `credits`. */
  currency: string;
}

/** The token counters, in LangBot's names (whole numbers). */
export interface TokenCounts {
  /** Input tokens (ACP `inputTokens`). */
  prompt_tokens?: number;
  /** Output tokens (ACP `outputTokens`). */
  completion_tokens?: number;
  /** All tokens as the agent counts them (ACP `totalTokens`). */
  total_tokens?: number;
  /** Tokens read from the prompt cache (ACP `cachedReadTokens`). */
  cached_read_tokens?: number;
  /** Tokens written to the prompt cache (ACP `cachedWriteTokens`). */
  cached_write_tokens?: number;
  /** Thought or reasoning tokens (ACP `thoughtTokens`). */
  thought_tokens?: number;
}

/** A run's usage: its tokens, and the last context window and cost reported. */
export interface RunUsage extends TokenCounts {
  /** Tokens in context (`usage_update.used`). */
  used?: number;
  /** Context window size (`usage_update.size`). */
  size?: number;
  /**
   * The cost: while the run lasts, the last one the agent reported
   * (`usage_update.cost`, the session's running total); on the terminal
   * event, what the run added to it ({@linkcode costSince}).
   */
  cost?: UsageCost | null;
}

/** ACP `Usage` field → LangBot's name, in the order usage is written. */
const ACP_TOKEN_NAMES: ReadonlyArray<[string, keyof TokenCounts]> = [
  ["inputTokens", "prompt_tokens"],
  ["outputTokens", "completion_tokens"],
  ["totalTokens", "total_tokens"],
  ["cachedReadTokens", "cached_read_tokens"],
  ["cachedWriteTokens", "cached_write_tokens"],
  ["thoughtTokens", "thought_tokens"],
];

/** The token counters, LangBot's names. */
export const TOKEN_KEYS: readonly (keyof TokenCounts)[] = ACP_TOKEN_NAMES.map((
  [, name],
) => name);

/**
 * The kinds `runner_tokens_total` counts, by counter (`total_tokens` is the
 * agent's own sum of these, so it is no kind of its own).
 */
export const TOKEN_KINDS: ReadonlyArray<[keyof TokenCounts, string]> = [
  ["prompt_tokens", "prompt"],
  ["completion_tokens", "completion"],
  ["cached_read_tokens", "cached_read"],
  ["cached_write_tokens", "cached_write"],
  ["thought_tokens", "thought"],
];

function count(value: unknown): number | undefined {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0
    ? value
    : undefined;
}

/**
 * The counters of ACP's `PromptResponse.usage` in LangBot's names; undefined
 * when it carries none (values that are not whole non-negative numbers are
 * left out).
 */
export function tokensFromAcp(usage: unknown): TokenCounts | undefined {
  if (!usage || typeof usage !== "object") return undefined;
  const source = usage as Record<string, unknown>;
  const tokens: TokenCounts = {};
  for (const [acpName, name] of ACP_TOKEN_NAMES) {
    const value = count(source[acpName]);
    if (value !== undefined) tokens[name] = value;
  }
  return Object.keys(tokens).length ? tokens : undefined;
}

/** The context window and cost of a `usage_update`, as far as it is well formed. */
export function windowFromAcp(update: Record<string, unknown>): RunUsage {
  const usage: RunUsage = {};
  const used = count(update.used);
  const size = count(update.size);
  if (used !== undefined) usage.used = used;
  if (size !== undefined) usage.size = size;
  const cost = costOf(update.cost);
  if (cost) usage.cost = cost;
  return usage;
}

/** A well-formed cost, or undefined. */
export function costOf(value: unknown): UsageCost | undefined {
  if (!value || typeof value !== "object") return undefined;
  const { amount, currency } = value as Record<string, unknown>;
  if (typeof amount !== "number" || !Number.isFinite(amount) || amount < 0) {
    return undefined;
  }
  if (
    typeof currency !== "string" || !/^[A-Za-z0-9_.-]{1,32}$/.test(currency)
  ) {
    return undefined;
  }
  return { amount, currency };
}

/**
 * What a run added to its session's cost: ACP's `usage_update.cost` is the
 * session's running total, so a run that continued a session whose total was
 * `before` cost the difference. A total in another currency, or below
 * `before` (the agent counted from zero again), is all the run's.
 */
export function costSince(
  total: UsageCost,
  before: UsageCost | undefined,
): UsageCost {
  if (
    !before || before.currency !== total.currency ||
    total.amount < before.amount
  ) return total;
  // Differences of fractions drift (0.3 - 0.1): 10 decimal places are kept.
  const amount = Math.round((total.amount - before.amount) * 1e10) / 1e10;
  return { amount, currency: total.currency };
}

/**
 * `earlier` followed by `later`: the token counters added, the context
 * window and cost `later`'s where it has them. Undefined when neither has
 * anything.
 */
export function addUsage(
  earlier: RunUsage | undefined,
  later: RunUsage | undefined,
): RunUsage | undefined {
  if (!later) return isEmpty(earlier) ? undefined : earlier;
  if (!earlier) return isEmpty(later) ? undefined : later;
  const sum: RunUsage = {};
  for (const key of TOKEN_KEYS) {
    const a = earlier[key];
    const b = later[key];
    if (a !== undefined || b !== undefined) sum[key] = (a ?? 0) + (b ?? 0);
  }
  for (const key of ["used", "size", "cost"] as const) {
    const value = later[key] ?? earlier[key];
    if (value !== undefined && value !== null) {
      (sum as Record<string, unknown>)[key] = value;
    }
  }
  return isEmpty(sum) ? undefined : sum;
}

function isEmpty(usage: RunUsage | undefined): boolean {
  return !usage || !Object.keys(usage).length;
}

/** Whether `usage` has any token counter. */
export function hasTokens(usage: RunUsage | undefined): boolean {
  return TOKEN_KEYS.some((key) => usage?.[key] !== undefined);
}

/** A stored or received usage object, kept only in its known, well-formed keys. */
export function usageFrom(value: unknown): RunUsage | undefined {
  if (!value || typeof value !== "object" || Array.isArray(value)) {
    return undefined;
  }
  const source = value as Record<string, unknown>;
  const usage: RunUsage = {};
  for (const key of [...TOKEN_KEYS, "used", "size"] as const) {
    const value = count(source[key]);
    if (value !== undefined) usage[key] = value;
  }
  const cost = costOf(source.cost);
  if (cost) usage.cost = cost;
  return isEmpty(usage) ? undefined : usage;
}

/** One run event, as streamed to callers and stored in the event log. */
export interface RunEvent {
  /** The run this event belongs to. */
  run_id: string;
  /** The event type (`message.delta`, `run.completed`, …). */
  type: string;
  /** The type's payload. */
  data: Record<string, unknown>;
  /**
   * Token usage in LangBot's names with the context window and cost, on
   * `run.completed` (the run's) and `run.failed` (what was counted so far);
   * absent when the agent reported none.
   */
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
  "agent.installing",
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
