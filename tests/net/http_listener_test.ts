/**
 * The hardened HTTP listener (`lib/net/http_listener.ts`) on its own, as a
 * hostile or slow client sees it over raw TCP: a request head that never
 * ends is answered 408, and at the connection cap a connection still sending
 * its head makes room for a new one while busy connections are kept and a
 * newcomer gets 503. Through a whole `runner serve`: `tcp_listener_test.ts`.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  type ConnectionLimits,
  startHttpListener,
} from "../../lib/net/http_listener.ts";
import {
  connectTo,
  HALF_SENT_HEAD,
  parseAnswer,
  rawRequest,
  readToEnd,
  writeAll,
} from "../raw_tcp_helpers.ts";

const LIMITS: ConnectionLimits = {
  maxConnections: 8,
  headerTimeoutMs: 10_000,
  requestTimeoutMs: 60_000,
  keepAliveTimeoutMs: 5_000,
};

/**
 * A listener whose `/hold` answers only once `release` is called and whose
 * other paths answer `ok` at once; `held` resolves as each `/hold` arrives.
 */
async function withListener(
  limits: Partial<ConnectionLimits>,
  test: (
    context: { url: string; held(): Promise<void>; release(): void },
  ) => Promise<void>,
): Promise<void> {
  const releases: Array<() => void> = [];
  let arrived = Promise.withResolvers<void>();
  const listener = startHttpListener({
    hostname: "127.0.0.1",
    port: 0,
    limits: { ...LIMITS, ...limits },
    onRequest(request, response) {
      if (request.url !== "/hold") return response.end("ok");
      releases.push(() => response.end("released"));
      arrived.resolve();
    },
    onError: () => {},
  });
  const url = `http://127.0.0.1:${listener.port}`;
  try {
    await test({
      url,
      async held() {
        await arrived.promise;
        arrived = Promise.withResolvers();
      },
      release: () => releases.splice(0).forEach((end) => end()),
    });
  } finally {
    releases.splice(0).forEach((end) => end());
    await listener.close(1000);
  }
}

/** `GET path` with `connection: close`; its answer. */
function get(url: string, path = "/") {
  return rawRequest(url, { path, headers: { host: "127.0.0.1" } });
}

Deno.test("a request head that stops midway is answered 408 http.request_timeout once the header timeout passes", async () => {
  await withListener({ headerTimeoutMs: 300 }, async ({ url }) => {
    const conn = await connectTo(url);
    await writeAll(conn, HALF_SENT_HEAD);
    const answer = parseAnswer(await readToEnd(conn));
    assert.equal(answer.status, 408);
    assert.equal(JSON.parse(answer.body).error.code, "http.request_timeout");
    assert.equal((await get(url)).body, "ok", "the listener still answers");
  });
});

Deno.test("at the cap a connection still sending its head makes room (503); busy ones are kept, and with every one busy a newcomer gets 503", async () => {
  await withListener({ maxConnections: 2 }, async ({ url, held, release }) => {
    const busy = await connectTo(url);
    await writeAll(busy, "GET /hold HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n");
    await held();
    const slow = await connectTo(url);
    await writeAll(slow, HALF_SENT_HEAD);
    // The cap is reached: the slow one goes, the newcomer is answered.
    assert.equal((await get(url)).body, "ok");
    const evicted = parseAnswer(await readToEnd(slow));
    assert.equal(evicted.status, 503);
    assert.equal(
      JSON.parse(evicted.body).error.code,
      "http.too_many_connections",
    );
    const second = await connectTo(url);
    await writeAll(second, "GET /hold HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n");
    await held();
    const refused = await get(url);
    assert.equal(refused.status, 503);
    assert.equal(
      JSON.parse(refused.body).error.code,
      "http.too_many_connections",
    );
    assert.equal(JSON.parse(refused.body).error.retryable, true);
    release();
    for (const conn of [busy, second]) {
      const text = new TextDecoder().decode(await readUntil(conn, "released"));
      assert.match(text, /^HTTP\/1\.1 200 /, "a busy connection was kept");
      conn.close();
    }
  });
});

/** Reads from a keep-alive connection until `marker` arrived. */
async function readUntil(conn: Deno.Conn, marker: string): Promise<Uint8Array> {
  let text = "";
  const chunk = new Uint8Array(4096);
  while (!text.includes(marker)) {
    const read = await conn.read(chunk);
    if (read === null) break;
    text += new TextDecoder().decode(chunk.subarray(0, read));
  }
  return new TextEncoder().encode(text);
}
