/**
 * Who may call `runner serve`: every route needs the API token
 * (`Authorization: Bearer …`) except the few that start, steer, answer or
 * read no run. No address is trusted: a request from loopback is not the
 * operator. The n8n webhook takes its own credentials when `--n8n-auth`
 * sets some; between fleet replicas the cluster token stands in. See
 * `docs/http-api.md`, "Authentication".
 *
 * @module
 */

import type { Context, Hono } from "hono";
import { CONSOLE_ASSETS } from "./console_assets.ts";
import { CONSOLE_MODULE_PATH, CONSOLE_MODULES } from "./console_modules.ts";
import { safeEqual, type ServerContext, unauthorized } from "./context.ts";

/**
 * The routes anyone may `GET`: health, metrics (counts by provider,
 * location and route pattern; no run, conversation or daemon id), the API
 * description, and the console's page and files (which hold nothing; the
 * console reads everything through the API with the token).
 */
export const OPEN_ROUTES: ReadonlySet<string> = new Set([
  "/healthz",
  "/metrics",
  "/openapi.json",
  "/",
  ...Object.keys(CONSOLE_ASSETS),
  ...Object.keys(CONSOLE_MODULES).map((file) => CONSOLE_MODULE_PATH + file),
]);

/** The n8n webhook's path: its own auth when `--n8n-auth` is not `none`. */
const N8N_WEBHOOK = "/v1/webhooks/n8n";

/** Whether anyone may make this request without the API token. */
function isOpen(c: Context): boolean {
  const method = c.req.method;
  return (method === "GET" || method === "HEAD") && OPEN_ROUTES.has(c.req.path);
}

/**
 * Requires the API token on every route but the open ones. With no token
 * configured every such request is refused, unless the operator chose
 * `--loopback-without-token`.
 */
export function requireApiToken(app: Hono, ctx: ServerContext): void {
  const { config } = ctx;
  app.use("*", async (c, next) => {
    if (isOpen(c)) return await next();
    if (c.req.path === N8N_WEBHOOK && config.n8n.auth !== "none") {
      return await next();
    }
    if (ctx.fleet?.isForwarded(c)) return await next();
    const token = config.apiToken;
    if (!token) {
      if (config.loopbackWithoutToken) return await next();
      throw unauthorized();
    }
    const header = c.req.header("authorization") ?? "";
    // A header value reaches us trimmed and on one line (fetch's Headers).
    const match = /^Bearer\s+(.+)/i.exec(header);
    if (!match || !safeEqual(match[1], token)) throw unauthorized();
    await next();
  });
}
