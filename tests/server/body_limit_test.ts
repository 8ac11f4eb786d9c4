/**
 * `--max-body-mb` on a body sent without `Content-Length` (chunked): one
 * byte over the limit is refused with 413 however the body is cut (in one
 * chunk, or with the last chunk crossing the limit), and a body of exactly
 * the limit gets through whole, as it does with `Content-Length`; a
 * `Content-Length` over the limit is refused before the body is sent.
 *
 * @module
 */

import assert from "node:assert/strict";
import { connectTo, writeAll } from "../raw_tcp_helpers.ts";
import { withServe } from "../serve_test_helpers.ts";

const API_TOKEN = "body-limit-api-token-Tq5Wm2Xc8Rb";

/** `--max-body-mb 0.0009765625`: exactly 1 KiB, so the limit is a whole byte count. */
const MAX_BODY_MB = "0.0009765625";
const LIMIT = 1024;

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
    { args: ["--max-body-mb", MAX_BODY_MB, "--api-token", API_TOKEN] },
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

/** A request body that names a provider no runner has, for its error to quote. */
function namingProvider(size: number): Uint8Array<ArrayBuffer> {
  const head =
    '{"config":{"provider":"no-such-provider-Kq4","workspace":"/srv/body-limit"},"input":{"text":"';
  const tail = '"}}';
  return new TextEncoder().encode(
    head + "y".repeat(size - head.length - tail.length) + tail,
  );
}

Deno.test("a chunked body within --max-body-mb reaches the route whole, in any cut; a bodiless request passes", async () => {
  await withServe(
    { args: ["--max-body-mb", MAX_BODY_MB, "--api-token", API_TOKEN] },
    async (serve) => {
      const whole = namingProvider(LIMIT);
      for (
        const chunks of [
          [whole],
          [
            whole.subarray(0, 100),
            whole.subarray(100, 700),
            whole.subarray(700),
          ],
        ]
      ) {
        const response = await fetch(`${serve.url}/v1/runs`, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            authorization: `Bearer ${API_TOKEN}`,
          },
          body: chunked(chunks),
        });
        const body = await response.json();
        // Refused by the route for the provider it names (a registry agent the
        // operator did not choose): the whole body reached it.
        assert.equal(response.status, 403, JSON.stringify(body));
        assert.match(body.error.message, /no-such-provider-Kq4/);
      }
      const listing = await fetch(`${serve.url}/v1/runs`, {
        headers: { authorization: `Bearer ${API_TOKEN}` },
      });
      await listing.body?.cancel();
      assert.equal(listing.status, 200);
    },
  );
});

Deno.test("a Content-Length over --max-body-mb is refused with 413 before any of the body is sent", async () => {
  await withServe(
    { args: ["--max-body-mb", MAX_BODY_MB, "--api-token", API_TOKEN] },
    async (serve) => {
      const conn = await connectTo(serve.url);
      try {
        await writeAll(
          conn,
          `POST /v1/runs HTTP/1.1\r\nHost: ${new URL(serve.url).host}\r\n` +
            `Authorization: Bearer ${API_TOKEN}\r\n` +
            `Content-Type: application/json\r\n` +
            `Content-Length: 50000000\r\n\r\n{"input":`,
        );
        // The answer comes while 50 MB are still unsent (a 30 s bound keeps
        // a server that waits for them from hanging the test).
        const timer = setTimeout(() => conn.close(), 30_000);
        let head = "";
        const buffer = new Uint8Array(4096);
        try {
          while (!head.includes("\r\n\r\n")) {
            const read = await conn.read(buffer);
            if (read === null) break;
            head += new TextDecoder().decode(buffer.subarray(0, read));
          }
        } finally {
          clearTimeout(timer);
        }
        assert.match(head, /^HTTP\/1.1 413 /);
      } finally {
        try {
          conn.close();
        } catch { /* closed */ }
      }
    },
  );
});
