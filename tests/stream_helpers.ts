import { apiFetch } from "./serve_test_helpers.ts";
/**
 * Helpers for tests that read streams as a client would: a safety net that
 * turns a hang into a failure, and reading a body until some text arrives.
 *
 * @module
 */

/** Fails instead of hanging when `promise` does not settle in `ms` (a safety net, not a timing check). */
export async function within<T>(
  promise: Promise<T>,
  what: string,
  ms = 30_000,
): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) =>
        timer = setTimeout(() => reject(new Error(`never saw ${what}`)), ms)
      ),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Reads from `reader` until `done(text so far)` holds, or the text includes
 * `done` when it is a string; returns that text. A stream that ends first
 * throws `ended` and the text read.
 */
export async function readUntilText(
  reader: ReadableStreamDefaultReader<string>,
  done: string | ((text: string) => boolean),
  ended = "the stream ended early",
): Promise<string> {
  const reached = typeof done === "string"
    ? (text: string) => text.includes(done)
    : done;
  let text = "";
  while (!reached(text)) {
    const read = await reader.read();
    if (read.done) throw new Error(`${ended}: ${text}`);
    text += read.value;
  }
  return text;
}

/** Reads the rest of `reader`. */
export async function readRest(
  reader: ReadableStreamDefaultReader<string>,
): Promise<string> {
  let text = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return text;
    text += value;
  }
}

/** A body's text reader. */
export function textReader(
  response: Response,
): ReadableStreamDefaultReader<string> {
  return response.body!.pipeThrough(new TextDecoderStream()).getReader();
}

/** POSTs JSON that `signal` can abort (a client that gives up). */
export function postAbortable(
  url: string,
  body: unknown,
  signal: AbortSignal,
): Promise<Response> {
  return apiFetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    signal,
  });
}
