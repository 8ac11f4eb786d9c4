/**
 * The shared accept loop (`lib/net/tcp_listener.ts`) in a real `runner serve`
 * under connection bursts: half-sent requests past the connection cap (at a
 * hard limit of 1 024 open files, and with a small cap), the process running
 * out of file descriptors, and a cap held by busy requests. A real request made during the burst is answered, `/healthz`
 * answers after it, and `/metrics` and the log say what happened.
 *
 * @module
 */

import assert from "node:assert/strict";
import { raiseFileLimit } from "../../lib/cli/serve/file_limit.ts";
import {
  closeAll,
  connectTo,
  metricValue,
  openHalfSent,
  parseAnswer,
  type RawAnswer,
  rawRequest,
  readToEnd,
  writeAll,
} from "../raw_tcp_helpers.ts";
import {
  apiHeaderLine,
  apiHeaders,
  type ServeProcess,
  withServe,
} from "../serve_test_helpers.ts";

/** A real client's request: `GET path` on a connection of its own. */
function get(serve: ServeProcess, path: string): Promise<RawAnswer> {
  return rawRequest(serve.url, {
    path,
    headers: { host: new URL(serve.url).host, ...apiHeaders(serve.url) },
  });
}

/**
 * Scrapes `/metrics` until `done` holds; every scrape is a real request and
 * must be answered 200 (or, with `retryRefusals`, a retryable refusal). The
 * deadline only keeps a broken server from hanging the test.
 */
async function scrapeUntil(
  serve: ServeProcess,
  done: (text: string) => boolean,
  options: { retryRefusals?: boolean } = {},
): Promise<string> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const answer = await get(serve, "/metrics");
    const refused = answer.status === 503 &&
      JSON.parse(answer.body).error.code === "http.too_many_connections";
    if (!(refused && options.retryRefusals)) {
      assert.equal(answer.status, 200, answer.body);
    }
    if (answer.status === 200 && done(answer.body)) return answer.body;
    if (Date.now() > deadline) {
      throw new Error(`/metrics never got there:\n${answer.body}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const http = (name: string) => `${name}{listener="http"}`;

Deno.test("at a hard limit of 1 024 open files, 1 100 half-sent requests cannot lock out a real request, and /healthz answers after them", async () => {
  const burst = 1100;
  // The burst's own sockets count against this process's limit.
  const own = await raiseFileLimit();
  assert.ok(
    (own.soft ?? 0) >= burst + 200,
    `this test needs ${burst + 200} open files; the limit is ${own.soft}`,
  );
  await withServe({
    wrapper: ["prlimit", "--nofile=1024:1024", "--"],
  }, async (serve) => {
    const lowered = await serve.waitForLog((entry) =>
      entry.msg === "max-connections lowered to fit the open-file limit"
    );
    assert.equal(lowered.max_connections, 512);
    const slow = await openHalfSent(serve.url, burst);
    try {
      // Each connection past the cap closed the oldest idle one to get in.
      const metrics = await scrapeUntil(
        serve,
        (text) =>
          (metricValue(text, http("runner_connections_evicted_total")) ?? 0) >=
            burst - 512,
      );
      assert.ok(metricValue(metrics, http("runner_connections_open"))! <= 512);
      assert.equal(metricValue(metrics, http("runner_connections_max")), 512);
      // The cap kept the process clear of its descriptor limit.
      assert.equal(metricValue(metrics, http("runner_accept_errors_total")), 0);
      const health = await get(serve, "/healthz");
      assert.equal(health.status, 200, health.body);
      assert.equal(JSON.parse(health.body).status, "ok");
      const note = await serve.waitForLog((entry) =>
        entry.msg === "idle connections closed at the cap"
      );
      assert.equal(note.listener, "http");
    } finally {
      closeAll(slow);
    }
    const after = await get(serve, "/healthz");
    assert.equal(after.status, 200, after.body);
    assert.doesNotMatch(serve.logs(), /Uncaught|Too many open files/);
  });
});

Deno.test("when its file descriptors run out, serve closes idle connections to free them, logs it and keeps answering", async () => {
  await withServe({ args: ["--max-connections", "64"] }, async (serve) => {
    // Leave the running server 16 descriptors: far fewer than its cap.
    const pid = serve.child.pid;
    const room = [...Deno.readDirSync(`/proc/${pid}/fd`)].length + 16;
    const lowered = await new Deno.Command("prlimit", {
      args: ["--pid", String(pid), `--nofile=${room}:${room}`],
    }).output();
    assert.ok(lowered.success, new TextDecoder().decode(lowered.stderr));
    const slow = await openHalfSent(serve.url, 100);
    try {
      const metrics = await scrapeUntil(
        serve,
        (text) =>
          (metricValue(text, http("runner_accept_errors_total")) ?? 0) >= 1 &&
          (metricValue(text, http("runner_connections_evicted_total")) ?? 0) >=
            1,
      );
      assert.ok(metricValue(metrics, http("runner_connections_open"))! < 64);
      const health = await get(serve, "/healthz");
      assert.equal(health.status, 200, health.body);
      const failed = await serve.waitForLog((entry) =>
        entry.msg === "accepting connections failed"
      );
      assert.equal(failed.listener, "http");
      assert.match(String(failed.hint), /out of file descriptors/);
    } finally {
      closeAll(slow);
    }
    const after = await get(serve, "/healthz");
    assert.equal(after.status, 200, after.body);
  });
});

/**
 * Opens an upload whose body never comes: a busy connection (the server has
 * its head once it answers `100 Continue`).
 */
async function busyUpload(serve: ServeProcess): Promise<Deno.TcpConn> {
  const conn = await connectTo(serve.url);
  await writeAll(
    conn,
    `POST /v1/runs HTTP/1.1\r\nHost: ${new URL(serve.url).host}\r\n` +
      apiHeaderLine(serve.url) +
      "content-type: application/json\r\ncontent-length: 1000\r\n" +
      "expect: 100-continue\r\n\r\n",
  );
  const answer = new Uint8Array(256);
  const read = await conn.read(answer);
  assert.match(
    new TextDecoder().decode(answer.subarray(0, read ?? 0)),
    /^HTTP\/1.1 100 /,
  );
  return conn;
}

Deno.test("at the cap an idle connection makes room for a real request; busy ones are kept, and with every one busy a new one gets 503", async () => {
  await withServe({ args: ["--max-connections", "4"] }, async (serve) => {
    const uploads = await Promise.all([1, 2, 3].map(() => busyUpload(serve)));
    const [stalled] = await openHalfSent(serve.url, 1);
    // The cap is full: the request still is answered, in the stalled one's place.
    const health = await get(serve, "/healthz");
    assert.equal(health.status, 200, health.body);
    const evicted = parseAnswer(await readToEnd(stalled));
    assert.equal(evicted.status, 503);
    assert.equal(
      JSON.parse(evicted.body).error.code,
      "http.too_many_connections",
    );

    // With a fourth upload every connection is busy: none may be closed.
    uploads.push(await busyUpload(serve));
    const refused = await get(serve, "/healthz");
    assert.equal(refused.status, 503);
    assert.equal(
      JSON.parse(refused.body).error.code,
      "http.too_many_connections",
    );
    assert.equal(JSON.parse(refused.body).error.retryable, true);
    // A closed upload frees its place once the server has seen it go.
    closeAll(uploads.splice(0, 1));
    const metrics = await scrapeUntil(serve, () => true, {
      retryRefusals: true,
    });
    assert.ok(
      metricValue(metrics, http("runner_connections_evicted_total"))! >= 1,
    );
    // The refusal above (and any scrape refused before the upload was seen going).
    assert.ok(
      metricValue(metrics, http("runner_connections_refused_total"))! >= 1,
    );
    closeAll(uploads);
    await serve.waitForLog((entry) =>
      entry.msg === "connections refused at the cap"
    );
  });
});

/** Sends a keep-alive `GET path` on `conn` and reads its chunked answer's head. */
async function keepAliveGet(
  conn: Deno.Conn,
  serve: ServeProcess,
  path: string,
): Promise<string> {
  await writeAll(
    conn,
    `GET ${path} HTTP/1.1\r\nHost: ${new URL(serve.url).host}\r\n` +
      `${apiHeaderLine(serve.url)}\r\n`,
  );
  let text = "";
  const chunk = new Uint8Array(4096);
  while (!text.endsWith("\r\n0\r\n\r\n")) {
    const read = await conn.read(chunk);
    if (read === null) throw new Error(`closed after ${JSON.stringify(text)}`);
    text += new TextDecoder().decode(chunk.subarray(0, read));
  }
  return text.slice(0, text.indexOf("\r\n"));
}

Deno.test("keep-alive connections are reused; at the cap the one idle the longest is closed without an answer to make room", async () => {
  await withServe({ args: ["--max-connections", "2"] }, async (serve) => {
    const [older, newer] = await Promise.all([
      connectTo(serve.url),
      connectTo(serve.url),
    ]);
    assert.match(
      await keepAliveGet(older, serve, "/healthz"),
      /^HTTP\/1.1 200 /,
    );
    assert.match(
      await keepAliveGet(newer, serve, "/healthz"),
      /^HTTP\/1.1 200 /,
    );
    // Both are idle between requests now, `older` the longest.
    const health = await get(serve, "/healthz");
    assert.equal(health.status, 200, health.body);
    assert.equal((await readToEnd(older)).length, 0, "closed without a word");
    assert.match(
      await keepAliveGet(newer, serve, "/healthz"),
      /^HTTP\/1.1 200 /,
    );
    newer.close();
  });
});
