/**
 * The n8n webhook's auth modes (`--n8n-auth`): none, basic, header, and jwt,
 * a token signed with the shared secret by one of the HMAC algorithms
 * (LangBot's "Algorithm" field is free text: HS256, HS384 or HS512).
 * Unsigned (`none`) and public-key tokens are refused with a 401 that says
 * why.
 *
 * @module
 */

import type { Context } from "hono";
import { decode, verify } from "hono/jwt";
import { RunnerError } from "../../errors.ts";
import type { N8nSettings } from "../config/serve_config.ts";
import { safeEqual, unauthorized } from "../context.ts";

/** Checks the webhook credentials `settings` require; throws `http.unauthorized`. */
export async function checkN8nAuth(
  c: Context,
  settings: N8nSettings,
): Promise<void> {
  const header = (name: string) => c.req.header(name) ?? "";
  switch (settings.auth) {
    case "none":
      return;
    case "basic": {
      // A header value reaches us trimmed and on one line (fetch's Headers).
      const match = /^Basic\s+(.+)/i.exec(header("authorization"));
      let decoded = "";
      try {
        decoded = match ? atob(match[1]) : "";
      } catch { /* not base64 */ }
      if (!safeEqual(decoded, `${settings.user}:${settings.password}`)) {
        throw unauthorized('Basic realm="runner"');
      }
      return;
    }
    case "header":
      if (!safeEqual(header(settings.headerName!), settings.headerValue!)) {
        throw unauthorized("Header");
      }
      return;
    case "jwt": {
      const match = /^Bearer\s+(.+)/i.exec(header("authorization"));
      if (!match) throw unauthorized();
      await verifyHmacJwt(match[1], settings.jwtSecret!);
      return;
    }
  }
}

/** The algorithms a shared secret can sign with. */
export const HMAC_ALGORITHMS = ["HS256", "HS384", "HS512"] as const;

type HmacAlgorithm = typeof HMAC_ALGORITHMS[number];

function refused(message: string): RunnerError {
  return new RunnerError("http.unauthorized", message, {
    detail: { scheme: "Bearer" },
  });
}

/** The algorithm a token's header names, or undefined when it is not a JWT. */
function headerAlgorithm(token: string): string | undefined {
  try {
    const alg = decode(token).header.alg;
    return typeof alg === "string" ? alg : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Checks `token` against `secret`: signed by HS256, HS384 or HS512, not
 * expired or not yet valid.
 *
 * @throws {RunnerError} `http.unauthorized`: "Unauthorized." for a bad
 * signature or an expired token; a reason for an algorithm the runner never
 * accepts.
 */
export async function verifyHmacJwt(
  token: string,
  secret: string,
): Promise<void> {
  const alg = headerAlgorithm(token);
  if (alg === undefined) throw refused("Unauthorized.");
  if (!HMAC_ALGORITHMS.includes(alg as HmacAlgorithm)) {
    throw refused(
      alg.toLowerCase() === "none"
        ? "Unsigned JWTs (alg none) are refused: sign the token with the shared secret (HS256, HS384 or HS512)."
        : `JWT algorithm ${
          JSON.stringify(alg.slice(0, 20))
        } is not accepted: the webhook shares a secret, so sign with HS256, HS384 or HS512 (LangBot's Algorithm field).`,
    );
  }
  try {
    // iat is not checked: a sender's clock a second ahead must not fail it.
    await verify(token, secret, { alg: alg as HmacAlgorithm, iat: false });
  } catch {
    throw refused("Unauthorized.");
  }
}
