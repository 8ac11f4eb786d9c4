/**
 * `--api-token` together with `--n8n-auth`: the webhook's own credentials
 * open the webhook only; every other `/v1` route still needs the bearer
 * token, whatever n8n credentials a request carries, and the bearer token
 * does not stand in for the webhook's credentials.
 *
 * @module
 */

import assert from "node:assert/strict";
import { withServe } from "../serve_test_helpers.ts";

const API_TOKEN = "auth-combo-api-token-Wd6Np2Qs9Lx4";

/** Each n8n auth mode: its flags and the headers that satisfy it. */
const MODES: { args: string[]; headers: Record<string, string> }[] = [
  {
    args: [
      "--n8n-auth",
      "header",
      "--n8n-auth-header-name",
      "x-key",
      "--n8n-auth-header-value",
      "hv-1234567890",
    ],
    headers: { "x-key": "hv-1234567890" },
  },
  {
    args: [
      "--n8n-auth",
      "basic",
      "--n8n-auth-user",
      "n8n",
      "--n8n-auth-password",
      "pw-1234567890",
    ],
    headers: { authorization: `Basic ${btoa("n8n:pw-1234567890")}` },
  },
];

const ROUTES: [string, string][] = [
  ["GET", "/v1/runs"],
  ["POST", "/v1/runs"],
  ["GET", "/v1/runs/some-run"],
  ["GET", "/v1/providers"],
  ["GET", "/v1/daemons"],
  ["GET", "/v1/conversations/some-conversation"],
  ["DELETE", "/v1/conversations/some-conversation"],
];

async function status(
  url: string,
  method: string,
  headers: Record<string, string>,
): Promise<number> {
  const response = await fetch(url, {
    method,
    headers: { "content-type": "application/json", ...headers },
    body: method === "POST" ? JSON.stringify({ input: { text: "x" } }) : null,
  });
  await response.body?.cancel();
  return response.status;
}

Deno.test("with --api-token and --n8n-auth, n8n credentials open the webhook only; the bearer token opens /v1 but not the webhook", async () => {
  for (const mode of MODES) {
    await withServe(
      { args: ["--api-token", API_TOKEN, ...mode.args] },
      async (serve) => {
        const bearer = { authorization: `Bearer ${API_TOKEN}` };
        for (const [method, path] of ROUTES) {
          const url = `${serve.url}${path}`;
          assert.equal(
            await status(url, method, mode.headers),
            401,
            `${mode.args[1]}: ${method} ${path} with n8n credentials only`,
          );
          assert.equal(await status(url, method, {}), 401, `${method} ${path}`);
          assert.notEqual(
            await status(url, method, bearer),
            401,
            `${method} ${path} with the bearer token`,
          );
        }
        const webhook = `${serve.url}/v1/webhooks/n8n?stream=false`;
        assert.equal(
          await status(webhook, "POST", bearer),
          401,
          `${mode.args[1]}: the bearer token is not the webhook's credential`,
        );
        assert.notEqual(await status(webhook, "POST", mode.headers), 401);
      },
    );
  }
});
