/**
 * The ACP transport: newline-delimited JSON over an agent's byte streams,
 * read by the runner itself so that it can (a) tolerate non-JSON noise on
 * stdout, (b) enforce its own message-size cap with a stable error, and (c)
 * see every `session/update`, including kinds the SDK does not know, in
 * arrival order. See `docs/transport.md`.
 *
 * @module
 */

import type { AnyMessage, Stream } from "@agentclientprotocol/sdk";
import { RunnerError } from "../errors.ts";

/** Options for {@linkcode createAcpStream}. */
export interface AcpStreamOptions {
  /** The agent's stdin. */
  output: WritableStream<Uint8Array>;
  /** The agent's stdout. */
  input: ReadableStream<Uint8Array>;
  /** Largest accepted inbound line, in bytes. */
  maxMessageBytes: number;
  /**
   * Sees each inbound message first, synchronously and in order; returning
   * true consumes it (it is not passed on to the SDK).
   */
  tap?: (message: AnyMessage) => boolean;
  /**
   * Called for each non-JSON line, whole: the caller redacts it before it
   * cuts it for logging, so no cut leaves part of a secret.
   */
  onNoise?: (line: string) => void;
  /** Called once when the inbound side fails (e.g. a message over the cap). */
  onFatal?: (error: RunnerError) => void;
}

const NEWLINE = 0x0a;

/** Makes the SDK `Stream` for an agent's stdio. */
export function createAcpStream(options: AcpStreamOptions): Stream {
  const encoder = new TextEncoder();
  const writer = options.output.getWriter();
  const writable = new WritableStream<AnyMessage>({
    async write(message) {
      await writer.write(encoder.encode(JSON.stringify(message) + "\n"));
    },
    async close() {
      await writer.close().catch(() => {});
    },
    async abort() {
      await writer.close().catch(() => {});
    },
  });
  const readable = new ReadableStream<AnyMessage>({
    async start(controller) {
      const deliver = (line: string) => {
        const message = parseLine(line, options.onNoise);
        if (message && !options.tap?.(message)) controller.enqueue(message);
      };
      try {
        await readLines(options.input, options.maxMessageBytes, deliver);
        controller.close();
      } catch (error) {
        const failure = error instanceof RunnerError ? error : new RunnerError(
          "acp.process_exited",
          `Reading from the agent failed: ${
            error instanceof Error ? error.message : String(error)
          }`,
        );
        options.onFatal?.(failure);
        controller.error(failure);
      }
    },
  });
  return { readable, writable };
}

function parseLine(
  line: string,
  onNoise?: (line: string) => void,
): AnyMessage | undefined {
  const text = line.endsWith("\r") ? line.slice(0, -1) : line;
  if (!text.trim()) return undefined;
  try {
    const value = JSON.parse(text);
    if (value && typeof value === "object" && !Array.isArray(value)) {
      return value as AnyMessage;
    }
  } catch { /* noise */ }
  onNoise?.(text);
  return undefined;
}

/**
 * Splits a byte stream into lines. Sizes are checked on bytes; each chunk is
 * decoded once (a newline byte never occurs inside a UTF-8 sequence), which
 * is much cheaper than one decode per line, and a line's unfinished tail is
 * kept as text rather than copied bytes.
 */
async function readLines(
  input: ReadableStream<Uint8Array>,
  maxBytes: number,
  onLine: (line: string) => void,
): Promise<void> {
  const decoder = new TextDecoder();
  let pending = "";
  let pendingBytes = 0;
  for await (const chunk of input) {
    const last = chunk.lastIndexOf(NEWLINE);
    const text = decoder.decode(chunk, { stream: true });
    if (last < 0) {
      pending += text;
      pendingBytes += chunk.length;
      if (pendingBytes > maxBytes) throw tooLarge(maxBytes);
      continue;
    }
    if (pendingBytes + last > maxBytes) {
      checkLineSizes(chunk, last, pendingBytes, maxBytes);
    }
    const all = pending + text;
    const end = all.lastIndexOf("\n");
    for (let start = 0; start <= end;) {
      const next = all.indexOf("\n", start);
      onLine(all.slice(start, next));
      start = next + 1;
    }
    pending = all.slice(end + 1);
    pendingBytes = chunk.length - last - 1;
    if (pendingBytes > maxBytes) throw tooLarge(maxBytes);
  }
  pending += decoder.decode();
  if (pending) onLine(pending);
}

/** Throws `acp.message_too_large` if a line of `chunk` up to `last` is over the cap. */
function checkLineSizes(
  chunk: Uint8Array,
  last: number,
  pendingBytes: number,
  maxBytes: number,
): void {
  let start = 0;
  let carried = pendingBytes;
  while (start <= last) {
    const end = chunk.indexOf(NEWLINE, start);
    if (carried + end - start > maxBytes) throw tooLarge(maxBytes);
    carried = 0;
    start = end + 1;
  }
}

function tooLarge(maxBytes: number): RunnerError {
  const mb = Math.round(maxBytes / (1024 * 1024));
  return new RunnerError(
    "acp.message_too_large",
    `The agent sent a message larger than ${mb} MiB. Raise max-message-mb if this agent legitimately sends such messages.`,
  );
}
