/**
 * A real `runner serve` against hostile clients: a flood of connections that
 * never finish their headers, cross-site browser requests, DNS-rebinding
 * `Host` names and non-JSON bodies; and `/healthz` while runs drain at
 * shutdown.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import {
  checkRequestSource,
  hostAllowed,
} from "../../lib/server/request_guard.ts";
import {
  connectTo,
  parseAnswer,
  rawRequest,
  readToEnd,
  writeAll,
} from "../raw_tcp_helpers.ts";
import {
  apiFetch,
  apiHeaders,
  fixtureConfig,
  gateIn,
  openGate,
  postJson,
  streamUntil,
  terminals,
  withServe,
} from "../serve_test_helpers.ts";

/**
 * GETs `url`, retrying while the server answers 503 too_many_connections
 * (for up to a minute: a safety net, not a timing check; a loaded machine
 * may take seconds to close the flood's sockets).
 */
async function fetchRetryingRefusals(url: string): Promise<Response> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const answer = await rawRequest(url, {
      path: new URL(url).pathname,
      headers: { host: new URL(url).host },
    });
    const refused = answer.status === 503 &&
      JSON.parse(answer.body).error.code === "http.too_many_connections";
    if (!refused || Date.now() > deadline) {
      return new Response(answer.body, { status: answer.status });
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

Deno.test("a flood of half-open connections is refused or timed out cleanly while a run streams to its end", async () => {
  await withServe({
    args: [
      "--allow-custom-commands",
      "--max-connections",
      "20",
      "--header-timeout",
      "1",
    ],
  }, async (serve, dir) => {
    const gate = await gateIn(dir);
    const response = await postJson(`${serve.url}/v1/runs`, {
      input: { text: "hold" },
      config: fixtureConfig(join(dir, "ws"), ["--gate-fifo", gate]),
    });
    const { events, messages } = await streamUntil(response, "message.delta");

    // 40 clients that send half a request head and then nothing.
    const flood = await Promise.all(
      Array.from({ length: 40 }, async () => {
        const conn = await connectTo(serve.url);
        await writeAll(conn, "GET /v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n");
        return conn;
      }),
    );
    const answers = await Promise.all(
      flood.map(async (conn) => parseAnswer(await readToEnd(conn))),
    );
    const codes = answers.map((answer) =>
      `${answer.status} ${JSON.parse(answer.body).error.code}`
    );
    const refused = codes.filter((c) => c === "503 http.too_many_connections");
    const timedOut = codes.filter((c) => c === "408 http.request_timeout");
    assert.equal(refused.length + timedOut.length, 40, codes.join(", "));
    assert.ok(refused.length >= 20, `refused ${refused.length}`);
    assert.ok(timedOut.length >= 1, `timed out ${timedOut.length}`);

    // The flood's slots free as its sockets close; a refusal is retryable.
    const health = await fetchRetryingRefusals(`${serve.url}/healthz`);
    assert.equal(health.status, 200);
    assert.equal((await health.json()).status, "ok");
    await openGate(gate);
    for await (const message of messages) events.push(JSON.parse(message.data));
    assert.deepEqual(terminals(events).map((e) => e.type), ["run.completed"]);
    assert.doesNotMatch(serve.logs(), /Too many open files|Uncaught/);
  });
});

Deno.test("cross-site requests and foreign Host names are refused; same-origin and allowed ones pass", async () => {
  await withServe({
    args: [
      "--allow-custom-commands",
      "--allowed-hosts",
      "runner.internal",
      "--allowed-origins",
      "https://console.example.com",
    ],
  }, async (serve, dir) => {
    const host = new URL(serve.url).host;
    const config = fixtureConfig(join(dir, "ws"));
    const body = JSON.stringify({
      input: { text: "hi" },
      config,
      stream: false,
    });

    // A web page's "simple" cross-site POST: text/plain, no preflight.
    const crossSite = await rawRequest(serve.url, {
      method: "POST",
      path: "/v1/runs",
      headers: {
        host,
        origin: "http://evil.example",
        "content-type": "text/plain",
      },
      body,
    });
    assert.equal(crossSite.status, 403);
    assert.equal(
      JSON.parse(crossSite.body).error.code,
      "http.origin_not_allowed",
    );
    // A page of another server on this machine (same host, another port)
    // and look-alikes of the allowed origin are other sites too.
    for (
      const origin of [
        `http://${new URL(serve.url).hostname}:3000`,
        `http://localhost:${new URL(serve.url).port}`,
        "https://console.example.com:8443",
        "http://console.example.com",
        "https://console.example.com.evil.example",
        "null",
      ]
    ) {
      const other = await rawRequest(serve.url, {
        method: "POST",
        path: "/v1/runs",
        headers: { host, origin, "content-type": "text/plain" },
        body,
      });
      assert.equal(other.status, 403, origin);
      assert.equal(
        JSON.parse(other.body).error.code,
        "http.origin_not_allowed",
        origin,
      );
    }
    const noOrigin = await rawRequest(serve.url, {
      method: "POST",
      path: "/v1/runs",
      headers: { host, "sec-fetch-site": "cross-site" },
      body,
    });
    assert.equal(
      JSON.parse(noOrigin.body).error.code,
      "http.origin_not_allowed",
    );

    // DNS rebinding: the page's own name now points at 127.0.0.1.
    const rebound = await rawRequest(serve.url, {
      path: "/v1/runs",
      headers: { host: "rebind.evil.example:8080" },
    });
    assert.equal(rebound.status, 403);
    assert.equal(JSON.parse(rebound.body).error.code, "http.host_not_allowed");
    for (
      const name of ["runner.internal.evil.example", "evilrunner.internal"]
    ) {
      const lookalike = await rawRequest(serve.url, {
        path: "/v1/runs",
        headers: { host: name },
      });
      assert.equal(lookalike.status, 403, name);
    }
    assert.match(JSON.parse(rebound.body).error.message, /--allowed-hosts/);

    // A body that is not JSON, even from a non-browser client.
    const plain = await apiFetch(`${serve.url}/v1/runs`, {
      method: "POST",
      headers: { "content-type": "text/plain" },
      body,
    });
    assert.equal(plain.status, 415);
    assert.equal(
      (await plain.json()).error.code,
      "http.unsupported_media_type",
    );
    const runs = await (await apiFetch(`${serve.url}/v1/runs`)).json();
    assert.deepEqual(runs.runs, [], "nothing was started");

    // Allowed: an allowed name, localhost, same-origin, an allowed origin.
    for (
      const headers of <Record<string, string>[]> [
        { host: "runner.internal" },
        { host: `localhost:${new URL(serve.url).port}` },
        { host, origin: `http://${host}` },
        { host, origin: "https://console.example.com" },
      ]
    ) {
      const answer = await rawRequest(serve.url, {
        path: "/v1/runs",
        headers: { ...headers, ...apiHeaders(serve.url) },
      });
      assert.equal(answer.status, 200, JSON.stringify(headers));
    }
    const preflight = await rawRequest(serve.url, {
      method: "OPTIONS",
      path: "/v1/runs",
      headers: {
        host,
        origin: "https://console.example.com",
        "access-control-request-method": "POST",
        "access-control-request-headers": "content-type",
      },
    });
    assert.equal(preflight.status, 204);
    assert.equal(
      preflight.headers["access-control-allow-origin"],
      "https://console.example.com",
    );
    const started = await rawRequest(serve.url, {
      method: "POST",
      path: "/v1/runs",
      headers: {
        host,
        origin: "https://console.example.com",
        "content-type": "application/json",
        ...apiHeaders(serve.url),
      },
      body,
    });
    assert.equal(started.status, 200);
    assert.equal(JSON.parse(started.body).status, "completed");
    assert.equal(
      started.headers["access-control-allow-origin"],
      "https://console.example.com",
    );
  });
});

Deno.test("/healthz answers 503 shutting_down while runs drain, then the server stops", async () => {
  await withServe({ args: ["--allow-custom-commands"] }, async (serve, dir) => {
    // An agent that ignores cancel keeps the drain open for its cancel-grace.
    const response = await postJson(`${serve.url}/v1/runs`, {
      input: { text: "hold" },
      config: {
        ...fixtureConfig(join(dir, "ws"), [
          "--stall-prompt",
          "--ignore-cancel",
        ]),
        "cancel-grace": 5,
      },
    });
    const { events, messages } = await streamUntil(response, "message.delta");
    serve.child.kill("SIGTERM");
    await serve.waitForLog((entry) => entry.msg === "shutting down");
    const health = await apiFetch(`${serve.url}/healthz`);
    assert.equal(health.status, 503);
    assert.equal((await health.json()).status, "shutting_down");
    const refused = await postJson(`${serve.url}/v1/runs`, {
      input: { text: "late" },
      config: fixtureConfig(join(dir, "ws")),
    });
    assert.equal(refused.status, 503);
    assert.equal((await refused.json()).error.code, "runner.shutting_down");
    for await (const message of messages) events.push(JSON.parse(message.data));
    assert.deepEqual(
      terminals(events).map((e) => e.data.code),
      ["runner.shutting_down"],
    );
    // Already stopping: wait for the exit (another signal would force it).
    assert.equal((await serve.child.status).code, 0);
  });
});

Deno.test("Host rules: IP addresses, localhost, the listen name and allowed names; not checked behind a token without a list", () => {
  const settings = {
    checkHost: true,
    listenHost: "devbox.lan",
    allowedHosts: ["runner.internal", "*.corp.example"],
    allowedOrigins: [],
  };
  for (
    const host of [
      "127.0.0.1:8080",
      "[::1]:8080",
      "198.51.100.7", // a documentation address, only as a Host header value
      "LOCALHOST:8080",
      "devbox.lan:8080",
      "runner.internal.",
      "ci.corp.example:443",
    ]
  ) {
    assert.ok(hostAllowed(host, settings), host);
  }
  for (const host of ["rebind.evil.example", "corp.example.evil", "", "[::1"]) {
    assert.ok(!hostAllowed(host, settings), host);
  }
  // With an API token and no --allowed-hosts the Host is not checked:
  // a rebinding page cannot present the token, and service names keep working.
  checkRequestSource({ host: "runner:8080" }, {
    ...settings,
    checkHost: false,
  });
  assert.throws(
    () => checkRequestSource({ host: "runner:8080" }, settings),
    /http.host_not_allowed|DNS rebinding/,
  );
});
