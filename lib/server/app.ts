/**
 * The HTTP service as a Hono app: the runs API, the n8n webhook, `/acp` and
 * the meta routes, with the API token on every route but the open ones
 * (`api_auth.ts`), the body limit, the concurrency
 * limit and one error shape (`{error:{code, message, retryable}}`). Pure:
 * the caller supplies the run manager and store and serves the app.
 *
 * @module
 */

import { Hono } from "hono";
import { accessLog } from "./access_log.ts";
import { limitBody } from "./body_limit.ts";
import {
  errorResponse,
  type ServerAppOptions,
  type ServerContext,
} from "./context.ts";
import { requireApiToken } from "./api_auth.ts";
import { RunnerError, toRunnerError } from "../errors.ts";
import { redactDeep } from "../secrets.ts";
import type { RunEvent } from "../events.ts";
import type { ServeConfig } from "./config/serve_config.ts";
import type { Metrics, RunLabels } from "./metrics.ts";
import { registerAgentRoutes } from "./agents.ts";
import { registerMetaRoutes } from "./meta.ts";
import { registerConsoleRoutes } from "./console.ts";
import { registerN8nRoutes } from "./n8n/route.ts";
import { registerAcpRoutes } from "./acp/route.ts";
import { registerPermissionRoutes } from "./permissions.ts";
import { registerRunRoutes } from "./runs.ts";
import { registerTranscriptRoutes } from "./transcripts.ts";
import { createFleetRouter } from "./fleet_router.ts";
import { checkRequestSource, originListed } from "./request_guard.ts";

export type {
  DaemonsView,
  ServerAppOptions,
  ServerContext,
} from "./context.ts";

/** Makes the Hono app of `runner serve`. */
export function createServerApp(options: ServerAppOptions): Hono {
  const context = createServerContext(options);
  const app = new Hono();
  app.use("*", accessLog(context));
  handleFailures(app, context);
  guardRequestSources(app, options.config);
  guardApiRoutes(app, context);
  registerConsoleRoutes(app, {
    allowCustomCommands: options.config.allowCustomCommands,
  });
  registerMetaRoutes(app, context);
  registerAgentRoutes(app, context);
  registerTranscriptRoutes(app, context);
  registerRunRoutes(app, context);
  registerPermissionRoutes(app, context);
  registerN8nRoutes(app, context);
  registerAcpRoutes(app, context, {
    describe: options.describeAcpTarget,
    stopping: options.stopping,
  });
  return app;
}

/** The context every route group gets: defaults filled, runs started under the limits. */
export function createServerContext(
  options: ServerAppOptions,
): ServerContext {
  const { manager, config } = options;
  const secrets = options.secrets ?? [];
  const log = options.log ?? (() => {});
  const isShuttingDown = options.isShuttingDown ?? (() => false);
  const fleetStore = options.store.fleet;
  return {
    ...options,
    fleet: fleetStore && config.fleet
      ? createFleetRouter({
        fleet: fleetStore,
        clusterToken: config.fleet.clusterToken,
        log,
        stopping: options.stopping,
      })
      : undefined,
    log,
    isShuttingDown,
    secrets,
    redact: (value) => redactDeep(value, secrets),
    async startRun(request, startOptions) {
      if (isShuttingDown()) {
        throw new RunnerError(
          "runner.shutting_down",
          "The runner is shutting down; retry against the restarted service.",
        );
      }
      const startedAt = performance.now();
      const outcome = await manager.start(request, {
        ...startOptions,
        maxActive: config.maxConcurrentRuns,
        onEvent: metricsListener(options.metrics, {
          provider: request.config.provider,
          location: request.config.location,
        }),
      });
      if (outcome.kind === "started") {
        outcome.run.done.then((result) =>
          log({
            msg: "run finished",
            run_id: outcome.run.runId,
            status: result.status,
            code: result.code,
            duration_ms: Math.round(performance.now() - startedAt),
          })
        );
      }
      return outcome;
    },
  };
}

/** A listener that feeds one started run's events to the metrics. */
function metricsListener(
  metrics: Metrics,
  labels: RunLabels,
): (event: RunEvent) => void {
  let listener: ((event: RunEvent) => void) | undefined;
  metrics.trackRun((receive) => {
    listener = receive;
    return () => listener = undefined;
  }, labels);
  return (event) => listener?.(event);
}

/** Answers thrown failures and unknown routes in the one error shape. */
function handleFailures(app: Hono, ctx: ServerContext): void {
  const { log, secrets } = ctx;
  app.onError((error, c) => {
    const failure = toRunnerError(error);
    if (failure.code === "runner.internal") {
      log({
        msg: "request failed",
        level: "error",
        method: c.req.method,
        path: c.req.path,
        error: failure.message,
      });
    }
    const headers: Record<string, string> = {};
    if (failure.code === "http.too_many_runs") headers["retry-after"] = "5";
    if (failure.code === "http.unauthorized") {
      headers["www-authenticate"] = String(failure.detail?.scheme ?? "Bearer");
    }
    return errorResponse(failure, secrets, headers);
  });
  app.notFound((c) =>
    errorResponse(
      new RunnerError(
        "http.not_found",
        `No route ${c.req.method} ${c.req.path}. See GET /openapi.json.`,
      ),
    )
  );
}

/**
 * The `Host` and `Origin` rules on every route, and CORS answers for the
 * origins the operator allowed (`--allowed-origins`).
 */
function guardRequestSources(app: Hono, config: ServeConfig): void {
  const settings = {
    // A token the runner made itself means a default loopback server: keep
    // the rebinding guard there as without a token.
    checkHost: !config.apiToken || config.apiTokenSource === "data-dir" ||
      config.allowedHosts.length > 0,
    listenHost: config.host,
    allowedHosts: config.allowedHosts,
    allowedOrigins: config.allowedOrigins,
  };
  app.use("*", async (c, next) => {
    const origin = c.req.header("origin");
    checkRequestSource({
      host: c.req.header("host"),
      origin,
      secFetchSite: c.req.header("sec-fetch-site"),
    }, settings);
    const cors = origin !== undefined && originListed(origin, settings);
    if (cors && c.req.method === "OPTIONS") {
      return c.body(null, 204, {
        "access-control-allow-origin": origin,
        "access-control-allow-methods": "GET, POST, DELETE, OPTIONS",
        "access-control-allow-headers": c.req.header(
          "access-control-request-headers",
        ) ?? "authorization, content-type, last-event-id",
        "access-control-max-age": "600",
        "vary": "Origin",
      });
    }
    await next();
    if (cors) {
      c.res.headers.set("access-control-allow-origin", origin);
      c.res.headers.set("access-control-expose-headers", "x-run-id");
      c.res.headers.append("vary", "Origin");
    }
  });
}

/** The body limit on `/v1`, and the API token on every route but the open ones. */
function guardApiRoutes(app: Hono, ctx: ServerContext): void {
  const { config } = ctx;
  app.use(
    "/v1/*",
    limitBody(config.maxBodyMb * 1024 * 1024, () =>
      errorResponse(
        new RunnerError(
          "http.body_too_large",
          `The request body exceeds ${config.maxBodyMb} MiB (--max-body-mb). Send smaller attachments or links.`,
        ),
      )),
  );
  requireApiToken(app, ctx);
}
