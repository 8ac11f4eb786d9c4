/**
 * What an operator of a real `runner serve` reads: one access-log line per
 * request without tokens, `conversation_id` on `run started`, only JSON lines
 * in a JSON log, `--log-level`/`--log-format` (and their variables), and
 * `/metrics` with `process_*`, build info, run durations, HTTP requests by
 * route and status, and provider/location labels.
 *
 * @module
 */

import assert from "node:assert/strict";
import { parseExposition } from "../prometheus_helpers.ts";
import { join } from "node:path";
import { RUNNER_VERSION } from "../../lib/version.ts";
import {
  apiFetch,
  assertStatus,
  fixtureConfig,
  postJson,
  spawnServe,
  sseEvents,
  tempDir,
  withServe,
} from "../serve_test_helpers.ts";
import { readUntilText, textReader, within } from "../stream_helpers.ts";

const TOKEN = "operable-token-0123456789abcdef";

/** The JSON log lines of a server's output; fails on any other line. */
function jsonLogLines(text: string): Record<string, unknown>[] {
  return text.split("\n").filter((line) => line.trim()).map((line) => {
    try {
      return JSON.parse(line);
    } catch {
      throw new Error(`a plain-text line in the JSON log: ${line}`);
    }
  });
}

Deno.test("one access-log line per request, without tokens; conversation_id on run started; nothing but JSON lines", async () => {
  await withServe({
    args: ["--api-token", TOKEN, "--allow-custom-commands"],
  }, async (serve, dir) => {
    const auth = { authorization: `Bearer ${TOKEN}` };
    const run = await postJson(`${serve.url}/v1/runs`, {
      conversation_id: "conv-log",
      input: "hello",
      config: fixtureConfig(join(dir, "ws")),
    }, auth);
    const runId = run.headers.get("x-run-id")!;
    await sseEvents(run);
    await (await apiFetch(`${serve.url}/v1/runs/missing?token=${TOKEN}`, {
      headers: auth,
    })).body?.cancel();
    await (await fetch(`${serve.url}/v1/runs`)).body?.cancel(); // 401
    // A chunked, body-less POST: what made Deno print a plain-text warning.
    const chunked = await apiFetch(`${serve.url}/v1/runs/missing/cancel`, {
      method: "POST",
      headers: auth,
      body: new ReadableStream({ start: (c) => c.close() }),
    });
    await assertStatus(chunked, 404);
    await (await apiFetch(`${serve.url}/healthz`)).body?.cancel();
    await serve.waitForLog((entry) =>
      entry.msg === "request" && entry.route === "/healthz"
    );

    const lines = jsonLogLines(serve.stderr());
    const requests = lines.filter((line) => line.msg === "request");
    assert.deepEqual(
      requests.map(({ method, route, status, run_id }) => ({
        method,
        route,
        status,
        run_id,
      })),
      [
        { method: "POST", route: "/v1/runs", status: 200, run_id: runId },
        {
          method: "GET",
          route: "/v1/runs/{id}",
          status: 404,
          run_id: "missing",
        },
        { method: "GET", route: "/v1/runs", status: 401, run_id: undefined },
        {
          method: "POST",
          route: "/v1/runs/{id}/cancel",
          status: 404,
          run_id: "missing",
        },
        { method: "GET", route: "/healthz", status: 200, run_id: undefined },
      ],
    );
    assert.ok(requests.every((line) => typeof line.duration_ms === "number"));
    assert.ok(!serve.logs().includes(TOKEN), "a token reached the log");
    const started = lines.find((line) => line.msg === "run started")!;
    assert.equal(started.conversation_id, "conv-log");
    assert.equal(started.run_id, runId);
  });
});

Deno.test("--log-level warn drops info lines but keeps the lifecycle; RUNNER_LOG_LEVEL works too", async () => {
  for (
    const options of [
      { args: ["--log-level", "warn"] },
      { env: { RUNNER_LOG_LEVEL: "warn" } },
    ]
  ) {
    await withServe(options, async (serve) => {
      await (await apiFetch(`${serve.url}/healthz`)).body?.cancel();
      await (await apiFetch(`${serve.url}/nope`)).body?.cancel();
      const status = await serve.stop("SIGTERM");
      assert.equal(status.code, 0);
      const lines = jsonLogLines(serve.stderr());
      assert.deepEqual(lines.map((line) => line.msg), [
        "listening",
        "shutting down",
        "stopped",
      ]);
    });
  }
});

Deno.test("--log-format text writes human lines; a bad level is refused", async () => {
  const dir = await tempDir();
  try {
    const child = spawnServe({
      dataDir: join(dir, "data"),
      args: ["--log-format", "text", "--log-level", "debug"],
    });
    const reader = textReader(new Response(child.stderr));
    const text = await within(
      readUntilText(reader, (sofar) => sofar.includes("listening")),
      "the listening line",
    );
    assert.match(
      text,
      /^\d\d:\d\d:\d\d listening url=http:\/\/127\.0\.0\.1:\d+$/m,
    );
    child.kill("SIGTERM");
    await reader.cancel();
    await child.stdout.cancel();
    await child.status;

    const bad = spawnServe({
      dataDir: join(dir, "data"),
      env: { RUNNER_LOG_FORMAT: "xml" },
    });
    const output = await bad.output();
    assert.equal(output.code, 2);
    assert.match(
      new TextDecoder().decode(output.stderr),
      /error \[config\.invalid\]: log-format: must be one of json, text/,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("/metrics: process metrics, build info, run durations and HTTP requests, with provider and location labels", async () => {
  await withServe({ args: ["--allow-custom-commands"] }, async (serve, dir) => {
    for (let index = 0; index < 2; index++) {
      await sseEvents(
        await postJson(`${serve.url}/v1/runs`, {
          input: `run ${index}`,
          config: fixtureConfig(join(dir, "ws")),
        }),
      );
    }
    await (await apiFetch(`${serve.url}/v1/runs/nope`)).body?.cancel();
    await serve.waitForLog((entry) =>
      entry.msg === "request" && entry.route === "/v1/runs/{id}"
    );
    const text = await (await apiFetch(`${serve.url}/metrics`)).text();
    const { samples } = parseExposition(text);
    const labels = 'provider="custom",location="local"';
    assert.equal(
      samples.get(`runner_runs_finished_total{status="completed",${labels}}`),
      2,
    );
    assert.doesNotMatch(text, /code=""/);
    assert.equal(
      samples.get(`runner_run_duration_seconds_count{${labels}}`),
      2,
    );
    assert.equal(
      samples.get(`runner_time_to_first_event_seconds_count{${labels}}`),
      2,
    );
    assert.equal(
      samples.get(
        'runner_http_requests_total{method="POST",route="/v1/runs",status="200"}',
      ),
      2,
    );
    assert.equal(
      samples.get(
        'runner_http_requests_total{method="GET",route="/v1/runs/{id}",status="404"}',
      ),
      1,
    );
    assert.equal(
      samples.get(
        'runner_http_request_duration_seconds_count{method="GET",route="/v1/runs/{id}",status="404"}',
      ),
      1,
    );
    assert.equal(
      samples.get(`runner_build_info{version="${RUNNER_VERSION}"}`),
      1,
    );
    assert.ok(samples.get("process_resident_memory_bytes")! > 0);
    assert.ok(samples.get("process_cpu_seconds_total")! > 0);
    assert.ok(samples.get("process_open_fds")! > 0);
    const start = samples.get("process_start_time_seconds")!;
    assert.ok(start > 1_600_000_000 && start <= Date.now() / 1000);
  });
});
