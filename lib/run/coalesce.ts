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
import type { DeltaStream, EventEmitter } from "./events.ts";

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
  /** Queues a chunk of `stream`'s text. */
  text(stream: DeltaStream, text: string): void;
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
  let pending: string[] = [];
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
    let content = pending.length ? redactor.push(pending.join("")) : "";
    pending = [];
    if (end) content += redactor.end();
    const kind = stream;
    if (end) {
      stream = undefined;
      redactor = undefined;
    }
    lastDeltaAt = performance.now();
    emitDelta(kind, content);
  }

  return {
    text(kind, text) {
      if (!text || next.ended) return;
      if (stream !== kind) flush(true);
      stream = kind;
      redactor ??= createStreamRedactor(options.secrets);
      pending.push(text);
      if (timer !== undefined) return;
      const wait = windowMs - (performance.now() - lastDeltaAt);
      if (wait <= 0) flush(false);
      else timer = setTimeout(() => flush(false), wait);
    },
    emit(type: string, data: Record<string, unknown>, usage?: RunUsage) {
      flush(true);
      next.emit(type, data, usage);
    },
    get ended() {
      return next.ended;
    },
  };
}
