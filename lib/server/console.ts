/**
 * `GET /`: the operator console, a page served from the binary, with its
 * own modules (`console_modules.ts`), the libraries they import
 * (`console_assets.ts`) and `/favicon.ico`. The page
 * itself holds nothing secret; everything it shows comes from the `/v1` API
 * with the same bearer auth as any client. See `docs/http-api.md`, "Console".
 *
 * @module
 */

import type { Hono } from "hono";
import { CONSOLE_ASSETS } from "./console_assets.ts";
import { CONSOLE_MODULE_PATH, CONSOLE_MODULES } from "./console_modules.ts";
import { consolePage } from "./console_page.ts";
import { CALLER_CONFIG_KEYS, COMMAND_CONFIG_KEYS } from "./policy.ts";

/**
 * The page's CSP: scripts and styles only with this response's nonce;
 * images from the agent's URLs only when the operator asked (`images`).
 */
function contentSecurityPolicy(nonce: string, images: boolean): string {
  return [
    "default-src 'none'",
    `script-src 'nonce-${nonce}'`,
    `style-src 'nonce-${nonce}'`,
    "connect-src 'self'",
    images ? "img-src 'self' data: https:" : "img-src 'self' data:",
    "form-action 'none'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
  ].join("; ");
}

/** What the console tells an operator of the server's caller policy. */
export interface ConsoleRouteOptions {
  /** `runner serve --allow-custom-commands`: callers may choose commands. */
  allowCustomCommands?: boolean;
}

/** Registers the console page at `/`, its modules and its static files. */
export function registerConsoleRoutes(
  app: Hono,
  options: ConsoleRouteOptions = {},
): void {
  const callerKeys = [
    ...CALLER_CONFIG_KEYS,
    ...(options.allowCustomCommands ? COMMAND_CONFIG_KEYS : []),
  ];
  app.get("/", (c) => {
    const nonce = crypto.randomUUID().replaceAll("-", "");
    const images = c.req.query("images") === "1";
    return c.html(consolePage(nonce, { images, callerKeys }), 200, {
      "content-security-policy": contentSecurityPolicy(nonce, images),
      "x-content-type-options": "nosniff",
      "referrer-policy": "no-referrer",
      "cache-control": "no-store",
    });
  });
  for (const [path, asset] of Object.entries(CONSOLE_ASSETS)) {
    app.get(path, (c) =>
      c.body(asset.body, 200, {
        "content-type": asset.type,
        "content-security-policy": "default-src 'none'",
        "x-content-type-options": "nosniff",
        "cache-control": "public, max-age=3600",
      }));
  }
  // The page is never cached: its modules must not be older than it.
  app.get(`${CONSOLE_MODULE_PATH}:file`, (c) => {
    const file = c.req.param("file");
    if (!Object.hasOwn(CONSOLE_MODULES, file)) return c.notFound();
    return c.body(CONSOLE_MODULES[file], 200, {
      "content-type": "text/javascript; charset=utf-8",
      "content-security-policy": "default-src 'none'",
      "x-content-type-options": "nosniff",
      "cache-control": "no-cache",
    });
  });
}
