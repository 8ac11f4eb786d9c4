/**
 * `GET /`: the operator console, a page served from the binary. The page
 * itself holds nothing secret; everything it shows comes from the `/v1` API
 * with the same bearer auth as any client. See `docs/http-api.md`, "Console".
 *
 * @module
 */

import type { Hono } from "hono";
import { consolePage } from "./console_page.ts";

/** Registers the console page at `/`. */
export function registerConsoleRoutes(app: Hono): void {
  app.get("/", (c) => {
    const nonce = crypto.randomUUID().replaceAll("-", "");
    return c.html(consolePage(nonce), 200, {
      "content-security-policy": [
        "default-src 'none'",
        `script-src 'nonce-${nonce}'`,
        `style-src 'nonce-${nonce}'`,
        "connect-src 'self'",
        "img-src 'self' data:",
        "form-action 'none'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
      ].join("; "),
      "x-content-type-options": "nosniff",
      "referrer-policy": "no-referrer",
      "cache-control": "no-store",
    });
  });
}
