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
import { OPEN_ROUTES } from "../../lib/server/api_auth.ts";
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
