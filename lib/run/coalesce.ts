/**
 * The coalescing stage: consecutive text chunks of one stream (the assistant
 * message, or thoughts) become one delta event per `delta-coalesce-ms`
 * window, redacted once, before events are numbered and handed on. Any other
 * event first flushes the pending text, so the order is exactly the agent's.
 * See `docs/events.md`.
 *
 * @module
 */

import type { RunUsage } from "../events.ts";
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
  let keeper: TextBuilder | undefined;
  let redactor: StreamRedactor | undefined;
  let lastDeltaAt = -Infinity;
  let timer: ReturnType<typeof setTimeout> | undefined;

  function emitDelta(kind: DeltaStream, content: string) {
    if (!content) return;
    if (kind === "thought") {
      next.emit("thought.delta", { content });
      return;
    }
    next.emit("message.delta", {
      chunk: {
        role: "assistant",
        content,
        msg_sequence: options.nextMessageSequence(),
      },
    });
  }

  /** Emits the pending text; `end` also releases the held-back tail. */
  function flush(end: boolean) {
    if (timer !== undefined) {
      clearTimeout(timer);
      timer = undefined;
    }
    if (!stream || !redactor) return;
    const text = pending.toString();
    pending = new TextBuilder();
    let content = text ? redactor.push(text) : "";
    if (end) content += redactor.end();
    const kind = stream;
    if (content) keeper?.append(content);
    if (end) {
      stream = undefined;
      redactor = undefined;
      keeper = undefined;
    }
    lastDeltaAt = performance.now();
    emitDelta(kind, content);
  }

  return {
    text(kind, text, keep) {
      if (!text || next.ended) return;
      if (stream !== kind || keeper !== keep) flush(true);
      stream = kind;
      keeper = keep;
      redactor ??= createStreamRedactor(options.secrets);
      pending.append(text);
      if (timer !== undefined) return;
      const wait = windowMs - (performance.now() - lastDeltaAt);
      if (wait <= 0) flush(false);
      else timer = setTimeout(() => flush(false), wait);
    },
    flush: () => flush(true),
    emit(type: string, data: Record<string, unknown>, usage?: RunUsage) {
      flush(true);
      next.emit(type, data, usage);
    },
    get ended() {
      return next.ended;
    },
  };
}
