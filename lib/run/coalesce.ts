/**
 * The coalescing stage: consecutive text chunks of one stream (the assistant
 * message, or thoughts) become one delta event per `delta-coalesce-ms`
 * window, redacted once, before events are numbered and handed on. Any other
 * event first flushes the pending text, so the order is the agent's, but for
 * a tail that could begin a secret: it waits for the stream's next text, or
 * the turn's end, whatever came between.
 * See `docs/events.md`.
 *
 * @module
 */

import { isTerminalEvent, type RunUsage } from "../events.ts";
import { createStreamRedactor, type StreamRedactor } from "../secrets.ts";
import { type DeltaStream, type EventEmitter, TextBuilder } from "./events.ts";

/** Options for {@linkcode createDeltaCoalescer}. */
export interface DeltaCoalescerOptions {
  /** The next stage: numbers events and enforces one terminal event. */
  next: EventEmitter;
  /** The window in ms; 0 emits one delta per chunk. */
  windowMs: number;
  /** Values redacted from delta text (also when split across chunks). */
  secrets: readonly string[];
  /** The next `msg_sequence` of the run. */
  nextMessageSequence: () => number;
}

/** One stream's redactor while its turn lasts, and where its text is kept. */
interface OpenStream {
  redactor: StreamRedactor;
  keeper?: TextBuilder;
}

/** An {@linkcode EventEmitter} that also takes text chunks and coalesces them. */
export interface DeltaCoalescer extends EventEmitter {
  /**
   * Queues a chunk of `stream`'s text. With `keep`, each delta's (redacted)
   * text is also appended there as it is flushed: the message and its deltas
   * share one copy of the text, and the chunks die young.
   */
  text(stream: DeltaStream, text: string, keep?: TextBuilder): void;
  /** Emits the pending text now (and whatever was held back). */
  flush(): void;
}

/**
 * Makes the coalescing stage in front of `options.next`. The first chunk
 * after a quiet window is emitted at once; chunks arriving within the window
 * after a delta are held and emitted together when it closes.
 */
export function createDeltaCoalescer(
  options: DeltaCoalescerOptions,
): DeltaCoalescer {
  const { next, windowMs } = options;
  let stream: DeltaStream | undefined;
  // Joined in batches, the chunks die young instead of outliving the window.
  let pending = new TextBuilder();
  // Each stream's text is redacted as one text until the turn ends: an agent
  // that puts a tool call or a thought between two halves of a secret must
  // not get them past the redactor, since a reader joins the deltas.
  const open = new Map<DeltaStream, OpenStream>();
  let lastDeltaAt = -Infinity;
  let timer: ReturnType<typeof setTimeout> | undefined;

  const emitDelta = (kind: DeltaStream, content: string) =>
    deltaEvent(options, kind, content);

  /**
   * Emits the pending text: `window` when the window closes (the stream
   * goes on), `boundary` before another stream's text or another event,
   * `end` when the turn (or the run) ends, which releases what the
   * redactors held back.
   */
  function flush(how: "window" | "boundary" | "end") {
    if (timer !== undefined) {
      clearTimeout(timer);
      timer = undefined;
    }
    if (stream) {
      const current = open.get(stream)!;
      const text = pending.toString();
      pending = new TextBuilder();
      const content = text ? current.redactor.push(text) : "";
      if (content) current.keeper?.append(content);
      lastDeltaAt = performance.now();
      emitDelta(stream, content);
      if (how !== "window") stream = undefined;
    }
    if (how !== "end") return;
    for (const [kind, held] of open) {
      const tail = held.redactor.end();
      if (tail) held.keeper?.append(tail);
      emitDelta(kind, tail);
    }
    open.clear();
  }

  return {
    text(kind, text, keep) {
      if (!text || next.ended) return;
      if (open.has(kind) && open.get(kind)!.keeper !== keep) flush("end");
      if (stream !== kind) flush("boundary");
      stream = kind;
      if (!open.has(kind)) {
        open.set(kind, {
          redactor: createStreamRedactor(options.secrets),
          keeper: keep,
        });
      }
      pending.append(text);
      if (timer !== undefined) return;
      const wait = windowMs - (performance.now() - lastDeltaAt);
      if (wait <= 0) flush("window");
      else timer = setTimeout(() => flush("window"), wait);
    },
    flush: () => flush("end"),
    emit(type: string, data: Record<string, unknown>, usage?: RunUsage) {
      flush(isTerminalEvent({ type }) ? "end" : "boundary");
      next.emit(type, data, usage);
    },
    get ended() {
      return next.ended;
    },
  };
}

/** Emits `content` (when there is any) as `kind`'s delta event. */
function deltaEvent(
  options: DeltaCoalescerOptions,
  kind: DeltaStream,
  content: string,
) {
  if (!content) return;
  if (kind === "thought") {
    options.next.emit("thought.delta", { content });
    return;
  }
  options.next.emit("message.delta", {
    chunk: {
      role: "assistant",
      content,
      msg_sequence: options.nextMessageSequence(),
    },
  });
}
