/**
 * `runner serve`'s parts assembled in the test process — the real config
 * loader, store, run manager, Hono app, retention timer and `node:http`
 * listener on 127.0.0.1 — for tests that need a knob no flag offers (a tiny live-event
 * buffer, a short store lock wait) or direct access to the store.
 *
 * @module
 */

import { runnerLocations } from "../lib/locations/runner_locations.ts";
import { join } from "node:path";
import { createAssetsHook } from "../lib/assets/wiring.ts";
import { RunnerError } from "../lib/errors.ts";
import { createReaperRegistry } from "../lib/agent/reaper.ts";
import {
  type HttpListener,
  startHttpListener,
} from "../lib/net/http_listener.ts";
import { createRunManager, type RunManager } from "../lib/run/manager.ts";
import { createServerApp } from "../lib/server/app.ts";
import {
  loadServeConfig,
  type ServeConfig,
} from "../lib/server/config/serve_config.ts";
import { createMetrics } from "../lib/server/metrics.ts";
import { type Retention, startRetention } from "../lib/server/retention.ts";
import { bridgeRequest } from "../lib/net/node_bridge.ts";
import { openStore } from "../lib/store/open.ts";
import { withApiToken } from "../lib/cli/serve/api_token.ts";
import { forgetApiToken, rememberApiToken } from "./serve_test_helpers.ts";
import type { OpenStoreOptions, RunStore } from "../lib/store/types.ts";

/** A served app in this process. */
export interface InProcessServe {
  /** `http://127.0.0.1:<port>`. */
  url: string;
  /** The API token it accepts (kept in the data dir unless given). */
  token?: string;
  store: RunStore;
  manager: RunManager;
  /** The retention timer (`pass()` runs one pass now). */
  retention: Retention;
  /** Every log entry so far. */
  logs: Record<string, unknown>[];
  /**
   * Resolves once a log entry satisfies `predicate`; rejects after 30 s (a
   * bound so a log line that never comes fails the test instead of hanging it).
   */
  waitForLog(
    predicate: (entry: Record<string, unknown>) => boolean,
  ): Promise<Record<string, unknown>>;
  close(): Promise<void>;
}

/** Options of {@linkcode startInProcessServe}. */
export interface InProcessServeOptions {
  /** The data directory. */
  dataDir: string;
  /** `runner serve` flags. */
  args?: string[];
  /** Live events held per stream reader. */
  maxPendingEvents?: number;
  /** Extra store options. */
  store?: Omit<OpenStoreOptions, "dataDir">;
}

/** Starts the app on 127.0.0.1 with a free port. */
export async function startInProcessServe(
  options: InProcessServeOptions,
): Promise<InProcessServe> {
  const config = await withApiToken(
    await loadServeConfig(
      ["--port", "0", "--data-dir", options.dataDir, ...(options.args ?? [])],
      { env: {} },
    ) as ServeConfig,
  );
  const logs: Record<string, unknown>[] = [];
  let waiters: (() => void)[] = [];
  const log = (entry: Record<string, unknown>) => {
    logs.push(entry);
    const woken = waiters;
    waiters = [];
    woken.forEach((wake) => wake());
  };
  const store = await openStore({
    dataDir: options.dataDir,
    onFlushError: (error) =>
      log({
        msg: "store flush failed",
        level: "error",
        code: error.code,
        error: error.message,
      }),
    ...options.store,
  });
  const assets = createAssetsHook({ log });
  const manager = createRunManager({
    locations: runnerLocations(),
    assets,
    store,
    registry: createReaperRegistry(join(options.dataDir, "agents")),
    log,
  });
  const metrics = createMetrics();
  const app = createServerApp({
    manager,
    store,
    config,
    metrics,
    log,
    maxPendingEvents: options.maxPendingEvents,
  });
  const retention = startRetention({
    store,
    settings: config.retention,
    metrics,
    log,
  });
  const listener: HttpListener = startHttpListener({
    hostname: "127.0.0.1",
    port: 0,
    limits: {
      maxConnections: 100,
      headerTimeoutMs: 10_000,
      requestTimeoutMs: 60_000,
      keepAliveTimeoutMs: 5_000,
    },
    onRequest: (request, response) =>
      void bridgeRequest(request, response, {
        handler: app.fetch,
        origin: "http://127.0.0.1",
        onError: (error) =>
          log({ msg: "request failed", error: String(error) }),
        errorResponse: () => new Response("internal", { status: 500 }),
      }),
    onError: (message, error) => log({ msg: message, error: String(error) }),
  });
  const url = `http://127.0.0.1:${listener.port}`;
  rememberApiToken(url, config.apiToken);
  return {
    url,
    token: config.apiToken,
    store,
    manager,
    retention,
    logs,
    async waitForLog(predicate) {
      const deadline = Date.now() + 30_000;
      for (;;) {
        const found = logs.find(predicate);
        if (found) return found;
        if (Date.now() > deadline) throw new Error("the log line never came");
        let timer: ReturnType<typeof setTimeout> | undefined;
        await new Promise<void>((resolve) => {
          waiters.push(resolve);
          timer = setTimeout(resolve, deadline - Date.now() + 1);
        });
        clearTimeout(timer);
      }
    },
    async close() {
      forgetApiToken(url);
      await manager.shutdown(
        new RunnerError("runner.shutting_down", "The test is over."),
      );
      await listener.close(1000);
      await assets.close();
      await retention.stop();
      try {
        await store.close();
      } catch { /* a test may leave the store unwritable */ }
    },
  };
}
