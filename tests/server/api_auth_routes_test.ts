/**
 * Which requests a real `runner serve` answers without its API token: `GET`
 * and `HEAD` of the open routes (health, metrics, the API description, the
 * console's page and files) and nothing else — no other method on those
 * paths, no other path, the n8n webhook only when `--n8n-auth` gives it
 * credentials of its own. Each open route is one the docs promise a
 * monitor or a browser can read without the token.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createRunManager } from "../../lib/run/manager.ts";
import { runnerLocations } from "../../lib/locations/runner_locations.ts";
import { OPEN_ROUTES } from "../../lib/server/api_auth.ts";
import { createServerApp } from "../../lib/server/app.ts";
import {
  loadServeConfig,
  type ServeConfig,
} from "../../lib/server/config/serve_config.ts";
import { createMetrics } from "../../lib/server/metrics.ts";
import { openStore } from "../../lib/store/open.ts";
import { tempDir } from "../helpers.ts";
import { withServe } from "../serve_test_helpers.ts";

const TOKEN = "api-auth-routes-token-Hq4Zm8Xv2Lk7Wp3Rn9Tb";

async function tokenless(
  url: string,
  method: string,
): Promise<{ status: number; code?: string }> {
  const response = await fetch(url, { method });
  const text = method === "HEAD" ? "" : await response.text();
  if (response.status !== 401 || !text) return { status: response.status };
  return { status: 401, code: JSON.parse(text).error.code };
}

Deno.test("without the token: GET and HEAD of every open route answer, any other method or route is 401", async () => {
  await withServe({ env: { RUNNER_API_TOKEN: TOKEN } }, async (serve) => {
    const open = [
      "/healthz",
      "/metrics",
      "/openapi.json",
      "/",
      "/console/marked.js",
      "/console/purify.js",
      "/console/app/main.js",
    ];
    for (const path of open) {
      assert.ok(OPEN_ROUTES.has(path), `${path} is an open route`);
    }
    for (const path of OPEN_ROUTES) {
      for (const method of ["GET", "HEAD"]) {
        assert.equal(
          (await tokenless(`${serve.url}${path}`, method)).status,
          200,
          `${method} ${path}`,
        );
      }
      for (const method of ["POST", "PUT", "DELETE"]) {
        assert.deepEqual(
          await tokenless(`${serve.url}${path}`, method),
          { status: 401, code: "http.unauthorized" },
          `${method} ${path}`,
        );
      }
    }
    for (
      const [method, path] of [
        ["GET", "/v1/runs"],
        ["HEAD", "/v1/runs"],
        ["POST", "/v1/webhooks/n8n"],
        ["GET", "/healthz/x"],
        ["GET", "/console/"],
      ]
    ) {
      assert.equal(
        (await tokenless(`${serve.url}${path}`, method)).status,
        401,
        `${method} ${path}`,
      );
    }
  });
});

Deno.test("with --loopback-without-token and no token, a tokenless request reaches /v1; with a token given it does not", async () => {
  await withServe({ args: ["--loopback-without-token"] }, async (serve) => {
    assert.equal((await tokenless(`${serve.url}/v1/runs`, "GET")).status, 200);
  });
  await withServe({
    args: ["--loopback-without-token"],
    env: { RUNNER_API_TOKEN: TOKEN },
  }, async (serve) => {
    assert.deepEqual(await tokenless(`${serve.url}/v1/runs`, "GET"), {
      status: 401,
      code: "http.unauthorized",
    });
  });
});

Deno.test("the Bearer scheme only at the start of the header, and any run of spaces before the token", async () => {
  await withServe({ env: { RUNNER_API_TOKEN: TOKEN } }, async (serve) => {
    const status = async (authorization: string) => {
      const answer = await fetch(`${serve.url}/v1/runs`, {
        headers: { authorization },
      });
      await answer.body?.cancel();
      return answer.status;
    };
    for (
      const refused of [
        `xBearer ${TOKEN}`,
        `Basic Bearer ${TOKEN}`,
        `Token Bearer ${TOKEN}`,
      ]
    ) {
      assert.equal(await status(refused), 401, refused);
    }
    for (const taken of [`Bearer  ${TOKEN}`, `Bearer \t ${TOKEN}`]) {
      assert.equal(await status(taken), 200, JSON.stringify(taken));
    }
  });
});

Deno.test("the app itself, holding no token and not told --loopback-without-token, refuses every tokenless request but the open routes", async () => {
  // `runner serve` always gives the app a token (made and kept when none is
  // given); the app must not rely on that.
  const dir = tempDir("api-auth-app-");
  const store = await openStore({ dataDir: dir });
  try {
    const config = await loadServeConfig(["--data-dir", dir], {
      env: {},
    }) as ServeConfig;
    assert.equal(config.apiToken, undefined);
    assert.equal(config.loopbackWithoutToken, false);
    const app = createServerApp({
      manager: createRunManager({ locations: runnerLocations(), store }),
      store,
      config,
      metrics: createMetrics(),
    });
    const runs = await app.request("http://127.0.0.1/v1/runs");
    assert.equal(runs.status, 401);
    assert.equal((await runs.json()).error.code, "http.unauthorized");
    const health = await app.request("http://127.0.0.1/healthz");
    assert.equal(health.status, 200);
    await health.body?.cancel();
  } finally {
    await store.close();
  }
});
