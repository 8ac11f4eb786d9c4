/**
 * `--max-body-mb` on a body sent without `Content-Length` (chunked): one
 * byte over the limit is refused with 413 however the body is cut (in one
 * chunk, or with the last chunk crossing the limit), and a body of exactly
 * the limit gets through, as it does with `Content-Length`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { withServe } from "../serve_test_helpers.ts";

const API_TOKEN = "body-limit-api-token-Tq5Wm2Xc8Rb";

/** `--max-body-mb 0.001`: the limit in bytes (`0.001 × 1 MiB`, rounded down). */
const LIMIT = Math.floor(0.001 * 1024 * 1024);

/** A JSON body of exactly `size` bytes that `POST /v1/runs` would read. */
function bodyOf(size: number): Uint8Array<ArrayBuffer> {
  const head = '{"input":{"text":"';
  const tail = '"}}';
  return new TextEncoder().encode(
    head + "x".repeat(size - head.length - tail.length) + tail,
  );
}

/** A chunked request body (no `Content-Length`) sent as `chunks`. */
function chunked(chunks: Uint8Array[]): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(chunk);
      controller.close();
    },
  });
}

async function post(
  url: string,
  body: BodyInit,
): Promise<{ status: number; code?: string }> {
  const response = await fetch(`${url}/v1/runs`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      authorization: `Bearer ${API_TOKEN}`,
    },
    body,
  });
  const text = await response.text();
  let code: string | undefined;
  try {
    code = JSON.parse(text).error?.code;
  } catch { /* not JSON */ }
  return { status: response.status, code };
}

Deno.test("a chunked body one byte over --max-body-mb gets 413 in one chunk or with its last chunk crossing the limit; exactly the limit passes", async () => {
  await withServe(
    { args: ["--max-body-mb", "0.001", "--api-token", API_TOKEN] },
    async (serve) => {
      const over = bodyOf(LIMIT + 1);
      const tooLarge = { status: 413, code: "http.body_too_large" };
      assert.deepEqual(await post(serve.url, chunked([over])), tooLarge);
      assert.deepEqual(
        await post(
          serve.url,
          chunked([over.subarray(0, LIMIT - 10), over.subarray(LIMIT - 10)]),
        ),
        tooLarge,
      );
      assert.deepEqual(
        await post(serve.url, chunked([...over].map((b) => Uint8Array.of(b)))),
        tooLarge,
        "a byte a chunk",
      );
      // The same sizes with Content-Length.
      assert.deepEqual(await post(serve.url, over), tooLarge);
      for (
        const body of [bodyOf(LIMIT), chunked([bodyOf(LIMIT)])]
      ) {
        const answer = await post(serve.url, body);
        assert.notEqual(answer.status, 413, "the limit itself is allowed");
        assert.notEqual(answer.code, "http.body_too_large");
      }
    },
  );
});
