/**
 * Buffered terminal output for `runner run`: text is collected and written
 * in few large writes — at a newline (when asked), after a short delay, past
 * a size, and at the end — instead of one write per event.
 *
 * @module
 */

/** Something that takes bytes synchronously, like `Deno.stdout`. */
export interface SyncWriter {
  /** Writes some of `bytes`; returns how many were written. */
  writeSync(bytes: Uint8Array): number;
}

/** Options for {@linkcode createBufferedOutput}. */
export interface BufferedOutputOptions {
  /** Where the text goes. */
  target: SyncWriter;
  /** Pending text is written at most this long after it arrived. */
  delayMs: number;
  /** Write at once when the text so far ends a line. */
  flushOnNewline: boolean;
  /** Write at once when this many characters are pending. */
  maxPending?: number;
}

/** Text output written in batches. */
export interface BufferedOutput {
  /** Queues `text`. */
  write(text: string): void;
  /** Writes everything queued now. */
  flush(): void;
}

const DEFAULT_MAX_PENDING = 64 * 1024;

/** Makes a {@linkcode BufferedOutput} over `options.target`. */
export function createBufferedOutput(
  options: BufferedOutputOptions,
): BufferedOutput {
  const encoder = new TextEncoder();
  const maxPending = options.maxPending ?? DEFAULT_MAX_PENDING;
  let pending = "";
  let timer: ReturnType<typeof setTimeout> | undefined;

  function writeOut(text: string) {
    const bytes = encoder.encode(text);
    let written = 0;
    while (written < bytes.length) {
      written += options.target.writeSync(bytes.subarray(written));
    }
  }

  /** Writes what is pending; unless `final`, half a surrogate pair waits for its other half. */
  function flushPending(final: boolean) {
    if (timer !== undefined) {
      clearTimeout(timer);
      timer = undefined;
    }
    const last = pending.charCodeAt(pending.length - 1);
    const keep = !final && last >= 0xd800 && last <= 0xdbff ? 1 : 0;
    const text = pending.slice(0, pending.length - keep);
    pending = pending.slice(pending.length - keep);
    if (text) writeOut(text);
  }

  return {
    write(text) {
      if (!text) return;
      pending += text;
      const lineEnded = options.flushOnNewline && text.includes("\n");
      if (lineEnded || pending.length >= maxPending) {
        flushPending(false);
      } else if (timer === undefined) {
        timer = setTimeout(() => flushPending(false), options.delayMs);
      }
    },
    flush: () => flushPending(true),
  };
}
