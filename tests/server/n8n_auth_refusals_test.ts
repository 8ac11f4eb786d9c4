/**
 * What a refused n8n webhook caller reads: the 401's code, message and the
 * scheme its `WWW-Authenticate` names, per `--n8n-auth` mode, and the
 * reason given for a JWT algorithm the runner never accepts. A sender whose
 * clock runs a little ahead is not refused.
 *
 * @module
 */

import assert from "node:assert/strict";
import { Hono } from "hono";
import { sign } from "hono/jwt";
import { RunnerError } from "../../lib/errors.ts";
import type { N8nSettings } from "../../lib/server/config/serve_config.ts";
import { checkN8nAuth } from "../../lib/server/n8n/auth.ts";

/** The refusal of a webhook request with `headers` (undefined: let in). */
async function refusal(
  settings: Partial<N8nSettings>,
  headers: Record<string, string>,
): Promise<{ code: string; message: string; scheme: unknown } | undefined> {
  let seen: { code: string; message: string; scheme: unknown } | undefined;
  const app = new Hono().post("/", async (c) => {
    try {
      await checkN8nAuth(c, settings as N8nSettings);
    } catch (error) {
      assert.ok(error instanceof RunnerError, String(error));
      seen = {
        code: error.code,
        message: error.message,
        scheme: error.detail?.scheme,
      };
    }
    return c.text("");
  });
  await (await app.request("/", { method: "POST", headers })).text();
  return seen;
}

const SECRET = "jwt-secret-Vq7Lm2Xw9Rk4";
const JWT = { auth: "jwt" as const, jwtSecret: SECRET };

function unsignedToken(alg: string): string {
  const part = (value: unknown) =>
    btoa(JSON.stringify(value)).replace(/=+$/, "").replaceAll("+", "-")
      .replaceAll("/", "_");
  return `${part({ alg, typ: "JWT" })}.${part({ sub: "bot" })}.`;
}

Deno.test("each n8n auth mode's 401 names its own scheme; none lets every request in", async () => {
  assert.equal(await refusal({ auth: "none" }, {}), undefined);
  assert.deepEqual(
    await refusal({ auth: "basic", user: "bot", password: "pw-123456" }, {
      authorization: `Basic ${btoa("bot:wrong")}`,
    }),
    {
      code: "http.unauthorized",
      message: "Unauthorized.",
      scheme: 'Basic realm="runner"',
    },
  );
  assert.deepEqual(
    await refusal(
      { auth: "header", headerName: "x-key", headerValue: "hv-123456" },
      { "x-key": "hv-12345" },
    ),
    { code: "http.unauthorized", message: "Unauthorized.", scheme: "Header" },
  );
  assert.deepEqual(await refusal(JWT, {}), {
    code: "http.unauthorized",
    message: "Unauthorized.",
    scheme: "Bearer",
  });
  assert.deepEqual(
    await refusal(JWT, {
      authorization: `Bearer ${await sign({ sub: "bot" }, "other", "HS256")}`,
    }),
    { code: "http.unauthorized", message: "Unauthorized.", scheme: "Bearer" },
  );
  assert.deepEqual(
    await refusal(JWT, { authorization: "Bearer not.a.jwt" }),
    { code: "http.unauthorized", message: "Unauthorized.", scheme: "Bearer" },
  );
});

Deno.test("an unsigned or public-key JWT is refused with the reason and the algorithms to sign with", async () => {
  for (const alg of ["none", "None", "NONE"]) {
    assert.deepEqual(
      await refusal(JWT, { authorization: `Bearer ${unsignedToken(alg)}` }),
      {
        code: "http.unauthorized",
        message:
          "Unsigned JWTs (alg none) are refused: sign the token with the shared secret (HS256, HS384 or HS512).",
        scheme: "Bearer",
      },
      alg,
    );
  }
  assert.deepEqual(
    await refusal(JWT, { authorization: `Bearer ${unsignedToken("RS256")}` }),
    {
      code: "http.unauthorized",
      message:
        'JWT algorithm "RS256" is not accepted: the webhook shares a secret, so sign with HS256, HS384 or HS512 (LangBot\'s Algorithm field).',
      scheme: "Bearer",
    },
  );
  const long = "X".repeat(30);
  assert.match(
    (await refusal(JWT, { authorization: `Bearer ${unsignedToken(long)}` }))!
      .message,
    new RegExp(`^JWT algorithm "${"X".repeat(20)}" is not accepted`),
  );
});

Deno.test("a JWT issued by a sender whose clock is a little ahead is accepted", async () => {
  const now = Math.floor(Date.now() / 1000);
  const ahead = await sign({ sub: "bot", iat: now + 30 }, SECRET, "HS384");
  assert.equal(
    await refusal(JWT, { authorization: `Bearer ${ahead}` }),
    undefined,
  );
});

Deno.test("credentials behind another scheme name, or a JWT whose algorithm is no string, are a plain 401", async () => {
  const basic = { auth: "basic" as const, user: "bot", password: "pw-123456" };
  for (const scheme of ["NotBasic", "XBasic", "Basics"]) {
    assert.deepEqual(
      await refusal(basic, {
        authorization: `${scheme} ${btoa("bot:pw-123456")}`,
      }),
      {
        code: "http.unauthorized",
        message: "Unauthorized.",
        scheme: 'Basic realm="runner"',
      },
      scheme,
    );
  }
  const good = await sign({ sub: "bot" }, SECRET, "HS256");
  for (const scheme of ["NotBearer", "XBearer"]) {
    assert.deepEqual(
      await refusal(JWT, { authorization: `${scheme} ${good}` }),
      { code: "http.unauthorized", message: "Unauthorized.", scheme: "Bearer" },
      scheme,
    );
  }
  for (const space of [" ", "  ", "\t"]) {
    assert.equal(
      await refusal(JWT, { authorization: `Bearer${space}${good}` }),
      undefined,
      JSON.stringify(space),
    );
  }
  for (const alg of [256, null, ["HS256"]]) {
    assert.deepEqual(
      await refusal(JWT, {
        authorization: `Bearer ${unsignedToken(alg as unknown as string)}`,
      }),
      { code: "http.unauthorized", message: "Unauthorized.", scheme: "Bearer" },
      JSON.stringify(alg),
    );
  }
});
