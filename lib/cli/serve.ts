/**
 * `runner serve`: reaps agents a crashed predecessor left, fails its
 * interrupted runs, serves the HTTP API, and on SIGTERM/SIGINT stops
 * accepting, cancels active runs (`runner.shutting_down`) so their streams
 * end with a terminal event, waits for every agent to be torn down, closes
 * the store and exits 0.
 *
 * @module
 */

import {
  createDaemonLocation,
  describeDaemons,
  type HubListener,
  hubMcpHandlerFor,
  startHubListener,
} from "../locations/daemon.ts";
import { createAssetsHook } from "../assets/wiring.ts";
import { join } from "node:path";
import { reportFailure } from "./args.ts";
import { RunnerError } from "../errors.ts";
import { createLogger, type Logger } from "../log.ts";
import { createMetrics } from "../server/metrics.ts";
import { createReaperRegistry, reapLeftoverGroups } from "../agent/reaper.ts";
import { createRunManager } from "../run/manager.ts";
import {
  loadServeConfig,
  SERVE_HELP,
  type ServeConfig,
  serveSecrets,
} from "../server/config.ts";
import { createServerApp } from "../server/app.ts";
import { type RunStore } from "../store/types.ts";
import { openStore } from "../store/open.ts";

function listenUrl(hostname: string, port: number): string {
  return `http://${
    hostname.includes(":") ? `[${hostname}]` : hostname
  }:${port}`;
}

async function openForServe(
  config: ServeConfig,
  log: Logger,
): Promise<RunStore> {
  const reaped = await reapLeftoverGroups(join(config.dataDir, "agents"));
  if (reaped.killed.length) {
    log({ msg: "reaped leftover agent groups", pgids: reaped.killed });
  }
  const store = openStore({
    dataDir: config.dataDir,
    onFlushError: (error) =>
      log({
        msg: "store flush failed",
        level: "error",
        code: error.code,
        error: error.message,
      }),
  });
  const failed = store.markActiveRunsFailed(
    "runner.restarted",
    "The runner stopped while this run was active; start the run again.",
  );
  if (failed.length) {
    log({ msg: "failed runs interrupted by a restart", run_ids: failed });
  }
  return store;
}

/** Runs `runner serve`; returns the exit code. */
export async function serveCommand(args: string[]): Promise<number> {
  let config: ServeConfig | "help";
  try {
    config = await loadServeConfig(args);
  } catch (error) {
    return reportFailure(error);
  }
  if (config === "help") {
    console.log(SERVE_HELP);
    return 0;
  }
  const secrets = serveSecrets(config);
  const log = createLogger({ secrets: () => secrets });
  let store: RunStore;
  try {
    store = await openForServe(config, log);
  } catch (error) {
    return reportFailure(error);
  }
  const metrics = createMetrics();
  const assets = createAssetsHook({ log });
  let hub: HubListener | undefined;
  if (config.daemon.enabled) {
    try {
      hub = startHubListener({
        host: config.daemon.host,
        port: config.daemon.port,
        token: config.daemon.token,
        dataDir: config.dataDir,
        mcpHandler: hubMcpHandlerFor((runId) => assets.backendForRun(runId)),
        onLog: (entry) =>
          log({
            msg: entry.message,
            level: entry.level,
            daemon_id: entry.daemonId,
            job_id: entry.jobId,
          }),
      });
    } catch (error) {
      await assets.close();
      store.close();
      return reportFailure(error);
    }
    log({ msg: "daemon hub listening", url: hub.server.url });
  }
  const manager = createRunManager({
    assets,
    locations: hub
      ? { daemon: createDaemonLocation({ hub: hub.hub, assets, log }) }
      : undefined,
    store,
    registry: metrics.countAgents(
      createReaperRegistry(join(config.dataDir, "agents")),
    ),
    secrets,
    log,
  });
  let shuttingDown = false;
  const app = createServerApp({
    manager,
    store,
    config,
    metrics,
    log,
    secrets,
    isShuttingDown: () => shuttingDown,
    daemons: hub && {
      list: () => describeDaemons(hub!.hub),
      unfence: (daemonId) => hub!.hub.unfence(daemonId),
    },
  });
  let server: Deno.HttpServer;
  try {
    server = Deno.serve({
      hostname: config.host,
      port: config.port,
      onListen: ({ hostname, port }) =>
        log({ msg: "listening", url: listenUrl(hostname, port) }),
      onError: (error) => {
        log({
          msg: "request failed",
          level: "error",
          error: error instanceof Error ? error.message : String(error),
        });
        return Response.json(
          {
            error: {
              code: "runner.internal",
              message: "Internal error.",
              retryable: true,
            },
          },
          { status: 500 },
        );
      },
    }, app.fetch);
  } catch (error) {
    await hub?.close();
    await assets.close();
    store.close();
    return reportFailure(
      new RunnerError(
        "config.invalid",
        `Cannot listen on ${config.host}:${config.port} (${
          error instanceof Error ? error.message : error
        }). Choose another --host/--port.`,
      ),
    );
  }

  const stop = Promise.withResolvers<string>();
  let signals = 0;
  const onSignal = (name: string) => {
    if (++signals === 1) return stop.resolve(name);
    // A second signal means "now": agents left behind are reaped on the next start.
    log({ msg: "second signal: stopping now", signal: name });
    Deno.exit(1);
  };
  const onTerm = () => onSignal("SIGTERM");
  const onInt = () => onSignal("SIGINT");
  Deno.addSignalListener("SIGTERM", onTerm);
  Deno.addSignalListener("SIGINT", onInt);
  const signal = await stop.promise;

  shuttingDown = true;
  log({ msg: "shutting down", signal, active_runs: manager.active().length });
  const closing = server.shutdown();
  await manager.shutdown(
    new RunnerError(
      "runner.shutting_down",
      "The runner is shutting down; start the run again once it is back.",
    ),
  );
  await closing;
  await hub?.close();
  await assets.close();
  store.close();
  Deno.removeSignalListener("SIGTERM", onTerm);
  Deno.removeSignalListener("SIGINT", onInt);
  log({ msg: "stopped" });
  return 0;
}
