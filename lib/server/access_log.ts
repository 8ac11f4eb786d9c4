/**
 * One access-log line and the HTTP metrics per request: method, route (the
 * route's pattern, never the query or any header, so no token is logged),
 * status, duration until the response started, and the run id.
 *
 * @module
 */

import type { Context, MiddlewareHandler } from "hono";
import { matchedRoutes } from "hono/route";
import type { Logger } from "../log.ts";
import type { Metrics } from "./metrics.ts";

/** The route pattern that answered, as `/openapi.json` writes it (`/v1/runs/{id}`). */
export function routeOf(c: Context): string {
  const route = matchedRoutes(c).findLast((matched) =>
    matched.method !== "ALL"
  );
  return route ? route.path.replace(/:(\w+)/g, "{$1}") : "unmatched";
}

function runIdOf(c: Context, route: string): string | undefined {
  const header = c.res.headers.get("x-run-id");
  if (header) return header;
  if (route.startsWith("/v1/runs/{id}")) return c.req.path.split("/")[3];
  return undefined;
}

/** The middleware that logs each request and counts it in `metrics`. */
export function accessLog(
  { log, metrics }: { log: Logger; metrics: Metrics },
): MiddlewareHandler {
  return async (c, next) => {
    const started = performance.now();
    await next();
    const seconds = (performance.now() - started) / 1000;
    const route = routeOf(c);
    const status = c.res.status;
    metrics.observeRequest({ method: c.req.method, route, status, seconds });
    log({
      msg: "request",
      level: status >= 500 ? "error" : "info",
      method: c.req.method,
      route,
      status,
      duration_ms: Math.round(seconds * 1000),
      run_id: runIdOf(c, route),
    });
  };
}
