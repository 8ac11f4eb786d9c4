/**
 * `/openapi.json` describes every route the app serves (structural OpenAPI 3
 * checks), and the meta routes of a real `runner serve` answer.
 *
 * @module
 */

import { runnerLocations } from "../../lib/locations/runner_locations.ts";
import assert from "node:assert/strict";
import { join } from "node:path";
import { createMetrics } from "../../lib/server/metrics.ts";
import { createRunManager } from "../../lib/run/manager.ts";
import {
  loadServeConfig,
  type ServeConfig,
} from "../../lib/server/config/serve_config.ts";
import { createServerApp } from "../../lib/server/app.ts";
import { openStore } from "../../lib/store/open.ts";
import { apiFetch, tempDir, withServe } from "../serve_test_helpers.ts";

const EXPECTED: Array<[string, string]> = [
  ["/", "get"],
  ["/console/app/{file}", "get"],
  ["/console/marked.js", "get"],
  ["/console/purify.js", "get"],
  ["/favicon.ico", "get"],
  ["/healthz", "get"],
  ["/metrics", "get"],
  ["/openapi.json", "get"],
  ["/v1/runs", "post"],
  ["/v1/runs", "get"],
  ["/v1/runs/{id}", "get"],
  ["/v1/runs/{id}/events", "get"],
  ["/v1/runs/{id}/input", "post"],
  ["/v1/runs/{id}/cancel", "post"],
  ["/v1/runs/{id}/permissions/{request_id}", "post"],
  ["/v1/providers", "get"],
  ["/v1/conversations/{id}", "get"],
  ["/v1/conversations/{id}", "delete"],
  ["/v1/conversations/{id}/transcript", "get"],
  ["/v1/runs/{id}/transcript", "get"],
  ["/v1/conversations/import", "post"],
  ["/v1/webhooks/n8n", "post"],
  ["/v1/daemons", "get"],
  ["/v1/daemons/{id}/unfence", "post"],
  ["/v1/agents", "get"],
  ["/v1/agents/{id}", "delete"],
];

type Doc = {
  openapi: string;
  info: { title: string; version: string };
  paths: Record<
    string,
    Record<
      string,
      {
        responses: Record<string, unknown>;
        parameters?: Array<{ name: string; in: string; $ref?: string }>;
      }
    >
  >;
  components: {
    schemas: Record<string, unknown>;
    parameters?: Record<string, { name: string; in: string }>;
  };
};

function checkStructure(doc: Doc) {
  assert.match(doc.openapi, /^3\.\d+\.\d+$/);
  assert.ok(doc.info.title && doc.info.version);
  for (const [path, method] of EXPECTED) {
    const operation = doc.paths[path]?.[method];
    assert.ok(operation, `${method.toUpperCase()} ${path} is not described`);
    assert.ok(
      Object.keys(operation.responses).length > 0,
      `${method} ${path} has no responses`,
    );
    for (const name of path.match(/\{(\w+)\}/g) ?? []) {
      const param = operation.parameters?.map((item) =>
        item.$ref
          ? doc.components.parameters![item.$ref.split("/").pop()!]
          : item
      ).find((item) => item.in === "path" && `{${item.name}}` === name);
      assert.ok(
        param,
        `${method} ${path} does not declare path parameter ${name}`,
      );
    }
  }
  const text = JSON.stringify(doc);
  for (
    const [, name] of text.matchAll(/"\$ref":"#\/components\/schemas\/(\w+)"/g)
  ) {
    assert.ok(doc.components.schemas[name], `unresolved $ref ${name}`);
  }
}

Deno.test("/openapi.json is OpenAPI 3 and describes every route with its methods", async () => {
  await withServe({}, async (serve) => {
    const response = await apiFetch(`${serve.url}/openapi.json`);
    assert.equal(response.status, 200);
    checkStructure(await response.json());
  });
});

Deno.test("every route the app registers is in the OpenAPI document", async () => {
  const dir = await tempDir();
  const store = await openStore({ dataDir: dir });
  try {
    const config = await loadServeConfig(["--data-dir", dir], {
      env: {},
    }) as ServeConfig;
    const manager = createRunManager({ locations: runnerLocations(), store });
    const app = createServerApp({
      manager,
      store,
      config,
      metrics: createMetrics(),
    });
    const documented = new Set(
      EXPECTED.map(([path, method]) => `${method} ${path}`),
    );
    const registered = app.routes
      .filter((route) => route.method !== "ALL")
      .map((route) =>
        `${route.method.toLowerCase()} ${route.path.replace(/:(\w+)/g, "{$1}")}`
      );
    assert.deepEqual(new Set(registered), documented);
  } finally {
    await store.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("/metrics is Prometheus text and /healthz answers", async () => {
  await withServe({}, async (serve) => {
    const metrics = await apiFetch(`${serve.url}/metrics`);
    assert.match(metrics.headers.get("content-type")!, /^text\/plain/);
    const text = await metrics.text();
    for (
      const name of [
        "runner_runs_active",
        "runner_runs_finished_total",
        "runner_agent_processes_alive",
      ]
    ) {
      assert.match(text, new RegExp(`# TYPE ${name} `));
    }
    assert.match(text, /# TYPE runner_time_to_first_event_seconds histogram/);
    assert.match(text, /# TYPE runner_chunk_latency_seconds histogram/);
    const health = await (await apiFetch(`${serve.url}/healthz`)).json();
    assert.equal(health.status, "ok");
    const unknown = await apiFetch(`${serve.url}/nope`);
    assert.equal(unknown.status, 404);
    assert.equal((await unknown.json()).error.code, "http.not_found");
  });
});

Deno.test("server settings: flags beat environment beat the config file", async () => {
  const dir = await tempDir();
  try {
    const file = join(dir, "serve.json");
    await Deno.writeTextFile(
      file,
      JSON.stringify({
        provider: "codex",
        timeout: 5,
        "max-concurrent-runs": 3,
        port: 9001,
      }),
    );
    const config = await loadServeConfig([
      "--config",
      file,
      "--provider",
      "gemini",
    ], {
      env: {
        RUNNER_PROVIDER: "claude-code",
        RUNNER_TIMEOUT: "7",
        RUNNER_DATA_DIR: dir,
      },
    }) as ServeConfig;
    assert.equal(config.runDefaults.provider, "gemini");
    assert.equal(config.runDefaults.timeout, "7");
    assert.equal(config.maxConcurrentRuns, 3);
    assert.equal(config.port, 9001);
    assert.equal(config.host, "127.0.0.1");
    assert.equal(config.dataDir, dir);
    await assert.rejects(
      loadServeConfig(["--timeout", "soon", "--data-dir", dir], { env: {} }),
      /config.invalid|timeout: must be a number/,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a body over --max-body-mb gets 413 http.body_too_large", async () => {
  await withServe({ args: ["--max-body-mb", "0.001"] }, async (serve) => {
    const response = await apiFetch(`${serve.url}/v1/runs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ input: { text: "x".repeat(4096) } }),
    });
    assert.equal(response.status, 413);
    const body = await response.json();
    assert.equal(body.error.code, "http.body_too_large");
    assert.match(body.error.message, /--max-body-mb/);
  });
});
