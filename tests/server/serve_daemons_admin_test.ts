/**
 * The operator's daemon administration against a real `runner serve` with its
 * hub: `runner daemons list|unfence --url` and `POST /v1/daemons/{id}/unfence`
 * lift a fence in the running server and remove its marker; without the hub
 * the route is 404.
 *
 * @module
 */

import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { FenceStore } from "../../lib/hub/fences.ts";
import { markerFileName } from "../../lib/relay.ts";
import { runCli, tempDir } from "../helpers.ts";
import { apiFetch, startServe, withServe } from "../serve_test_helpers.ts";

const DAEMON_TOKEN = "serve-daemons-admin-Rk3Vn8Qw5Ty2Lp7Jz4Hc9Bx";

Deno.test("runner daemons list and unfence --url reach a running server: POST /v1/daemons/{id}/unfence lifts the fence in memory and its marker", async () => {
  const apiToken = "serve-daemons-api-token-Hx4Vq9Lp2Wz7";
  const dataDir = tempDir();
  const stateDir = join(dataDir, "relay");
  // A fence left by an earlier hub: the server loads it at start.
  await new FenceStore(stateDir).ensureMarker("box-9");
  const serve = await startServe({
    dataDir,
    args: [
      "--daemon-enabled",
      "--daemon-port",
      "0",
      "--daemon-token",
      DAEMON_TOKEN,
      "--api-token",
      apiToken,
    ],
  });
  const auth = { authorization: `Bearer ${apiToken}` };
  // The CLI gets a data dir of its own: what it shows and lifts comes from
  // the server alone.
  const cli = (...args: string[]) =>
    runCli(["daemons", ...args, "--url", serve.url, "--data-dir", tempDir()], {
      env: { RUNNER_API_TOKEN: apiToken },
    });
  try {
    const listed = await cli("list", "--json");
    assert.equal(listed.code, 0, listed.stderr);
    assert.deepEqual(JSON.parse(listed.stdout), [{
      daemon_id: "box-9",
      connected: false,
      fenced: true,
      active_jobs: [],
      marker: false,
    }]);
    const unauthorized = await runCli([
      "daemons",
      "list",
      "--url",
      serve.url,
      "--data-dir",
      tempDir(),
    ], { env: { RUNNER_API_TOKEN: "" } });
    assert.equal(unauthorized.code, 1);
    assert.match(unauthorized.stderr, /answered 401.*--api-token/);

    const lifted = await cli("unfence", "box-9", "--yes");
    assert.equal(lifted.code, 0, lifted.stderr);
    assert.equal(lifted.stdout, "daemon box-9 unfenced.\n");
    assert.equal(existsSync(join(stateDir, markerFileName("box-9"))), false);
    const daemons = await (await apiFetch(`${serve.url}/v1/daemons`, {
      headers: auth,
    })).json();
    assert.deepEqual(daemons, { daemons: [] });
    const again = await apiFetch(`${serve.url}/v1/daemons/box-9/unfence`, {
      method: "POST",
      headers: auth,
    });
    assert.deepEqual(await again.json(), {
      daemon_id: "box-9",
      was_fenced: false,
    });
    const notFenced = await cli("unfence", "box-9", "--yes");
    assert.equal(notFenced.code, 1);
    assert.match(notFenced.stderr, /was not fenced/);
  } finally {
    await serve.stop();
  }
});

Deno.test("POST /v1/daemons/{id}/unfence without the hub is 404 http.not_found", async () => {
  await withServe({}, async (serve) => {
    const response = await apiFetch(`${serve.url}/v1/daemons/box-9/unfence`, {
      method: "POST",
    });
    const body = await response.json();
    assert.equal(response.status, 404);
    assert.equal(body.error.code, "http.not_found");
    assert.match(body.error.message, /--daemon-enabled/);
  });
});
