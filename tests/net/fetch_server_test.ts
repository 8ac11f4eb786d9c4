/**
 * A local endpoint for a fetch-style handler (`lib/net/fetch_server.ts`, the
 * assets bridge's and the daemon's MCP proxy's server), as its client sees
 * it: the handler's answer comes through whole, and a handler that throws is
 * a plain 500 `runner.internal` that tells the client nothing of the error.
 *
 * @module
 */

import assert from "node:assert/strict";
import { serveFetch } from "../../lib/net/fetch_server.ts";

Deno.test("serveFetch hands the handler the request and its answer back whole", async () => {
  const server = serveFetch(async (request) => {
    const body = await request.text();
    return Response.json(
      { method: request.method, path: new URL(request.url).pathname, body },
      { status: 201, headers: { "x-seen": request.headers.get("x-sent")! } },
    );
  }, { name: "test" });
  try {
    const answer = await fetch(`http://127.0.0.1:${server.port}/mcp?x=1`, {
      method: "POST",
      headers: { "x-sent": "yes" },
      body: "ünïcode",
    });
    assert.equal(answer.status, 201);
    assert.equal(answer.headers.get("x-seen"), "yes");
    assert.deepEqual(await answer.json(), {
      method: "POST",
      path: "/mcp",
      body: "ünïcode",
    });
  } finally {
    await server.close();
  }
});

Deno.test("a handler that throws is a 500 runner.internal to the client; the error goes to the log only", async () => {
  const logged: Record<string, unknown>[] = [];
  const server = serveFetch(() => {
    throw new Error("token-3f9a in the handler's error");
  }, { name: "test", log: (entry) => logged.push(entry) });
  try {
    const answer = await fetch(`http://127.0.0.1:${server.port}/`);
    const text = await answer.text();
    assert.equal(answer.status, 500);
    assert.deepEqual(JSON.parse(text).error, {
      code: "runner.internal",
      message: "Internal error.",
      retryable: true,
    });
    assert.ok(!text.includes("token-3f9a"), text);
    assert.ok(
      logged.some((entry) => String(entry.error).includes("token-3f9a")),
      "the failure is logged",
    );
  } finally {
    await server.close();
  }
});
