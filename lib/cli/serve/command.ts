/**
 * `runner serve`: reaps agents a crashed predecessor left, checks the store
 * file, fails its interrupted runs, serves the HTTP API, prunes old runs on a
 * timer (`server/retention.ts`), and on SIGTERM/SIGINT refuses new
 * runs (`/healthz` answers 503 while runs drain), cancels active runs
 * (`runner.shutting_down`) so their streams end with a terminal event, stops
 * the warm agents, waits for every agent to be torn down, stops listening,
 * closes the store and exits 0.
 *
 * `cli/serve/` owns `runner serve` as a command: this file wires the server,
 * the store, the hub and the warm agents together; `listen.ts` is how it
 * listens (with the open-file limit, `file_limit.ts`), `fleet.ts` a fleet
 * replica's duties.
 *
 * @module
 */

import {
  createDaemonLocation,
  describeDaemons,
  type HubListener,
  hubMcpHandlerFor,
  startHubListener,
} from "../../locations/daemon.ts";
import { type AssetsHook, createAssetsHook } from "../../assets/wiring.ts";
import { join } from "node:path";
import { reportFailure } from "../args.ts";
import { RunnerError } from "../../errors.ts";
import { createLogger, type Logger } from "../../log.ts";
import { createMetrics, type Metrics } from "../../server/metrics.ts";
import {
  createReaperRegistry,
  reapLeftoverGroups,
} from "../../agent/reaper.ts";
import { runnerLocations } from "../../locations/runner_locations.ts";
import { createRunManager, type RunManager } from "../../run/manager.ts";
import {
  type RegistryContext,
  resolveRegistryProvider,
} from "../../providers.ts";
import { createWarmPool, type WarmPool } from "../../run/warm/pool.ts";
import { preloadAcpClient } from "../../run/startup.ts";
import {
  loadServeConfig,
  SERVE_HELP,
  type ServeConfig,
  serveSecrets,
} from "../../server/config/serve_config.ts";
import { createServerApp } from "../../server/app.ts";
import { createTargetDescriber } from "./acp_targets.ts";
import type { TargetDescriber } from "../../server/acp/target.ts";
import { startRetention } from "../../server/retention.ts";
import {
  failOrphanedRuns,
  ORPHANED_RUN_MESSAGE,
  REPLICA_LOST_MESSAGE,
} from "../../server/context.ts";
import { type RunStore } from "../../store/types.ts";
import { openStore } from "../../store/open.ts";
import { type FleetDuties, startFleetDuties } from "./fleet.ts";
import { checkListenerToken, isLoopbackHost } from "../../hub/token_rules.ts";
import type { HttpListener } from "../../net/http_listener.ts";
import { catchStrayRejections, fitLimits, listen } from "./listen.ts";
import { withApiToken } from "./api_token.ts";
import { daemonTokenPath, withDaemonToken } from "./daemon_token.ts";

/** How often runs owned by a process that is gone are looked for while serving. */
const ORPHAN_SWEEP_MS = 10_000;

async function openForServe(
  config: ServeConfig,
  log: Logger,
): Promise<RunStore> {
  // Before listening (in parallel, so at most one grace period): a new run
  // must not meet a predecessor's agent still working in its workspace.
  const reaped = await reapLeftoverGroups(join(config.dataDir, "agents"));
  if (reaped.killed.length) {
    log({ msg: "reaped leftover agent groups", pgids: reaped.killed });
  }
  const fleet = config.fleet;
  const store = await openStore({
    dataDir: config.dataDir,
    checkIntegrity: true,
    reclaimSpace: true,
    log,
    shared: fleet && {
      url: fleet.storeUrl,
      replicaId: fleet.replicaId,
      advertiseUrl: fleet.advertiseUrl,
      leaseMs: fleet.leaseMs,
      log,
    },
    onFlushError: (error) =>
      log({
        msg: "store flush failed",
        level: "error",
        code: error.code,
        error: error.message,
      }),
  });
  const failed = fleet
    ? await store.markActiveRunsFailed(
      "runner.replica_lost",
      REPLICA_LOST_MESSAGE,
    )
    : await store.markActiveRunsFailed(
      "runner.restarted",
      ORPHANED_RUN_MESSAGE,
    );
  if (fleet) {
    log({
      msg: "joined the fleet",
      replica_id: fleet.replicaId,
      url: fleet.advertiseUrl,
    });
  }
  if (failed.length) {
    log({ msg: "failed runs interrupted by a restart", run_ids: failed });
  }
  return store;
}

/** What serving needs once the config is loaded and the store is open. */
interface ServeContext {
  /** The serve config. */
  config: ServeConfig;
  /** Values to redact (API and daemon tokens, run defaults' secrets). */
  secrets: string[];
  /** The structured log. */
  log: Logger;
  /** The open store. */
  store: RunStore;
}

/** What runs need besides the store: assets, the daemon hub, the manager. */
interface RunServices {
  /** Prometheus metrics. */
  metrics: Metrics;
  /** Assets wiring. */
  assets: AssetsHook;
  /** The daemon hub, when `--daemon-enabled`. */
  hub?: HubListener;
  /** The run manager. */
  manager: RunManager;
  /** The fleet duties, when the store is shared. */
  fleet?: FleetDuties;
  /** Conversations' agents kept warm between runs. */
  warmPool: WarmPool;
  /** What `/acp` learns of a target agent (a handshake-only probe). */
  describeAcpTarget: TargetDescriber;
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
  try {
    if (!isLoopbackHost(config.host)) {
      checkListenerToken({
        token: config.apiToken,
        host: config.host,
        purpose: "--api-token",
      });
    }
    if (config.fleet) {
      // Replicas send it to each other over the network: always the token rules.
      checkListenerToken({
        token: config.fleet.clusterToken,
        host: config.host,
        purpose: "--cluster-token",
      });
    }
    config = await withApiToken(config);
    config = await withDaemonToken(config);
  } catch (error) {
    return reportFailure(error);
  }
  const secrets = serveSecrets(config);
  const log = createLogger({
    secrets: () => secrets,
    level: config.logLevel,
    format: config.logFormat,
  });
  const stopCatching = catchStrayRejections(log);
  try {
    return await serveWithLog(config, secrets, log);
  } finally {
    stopCatching();
  }
}

/** Opens the store and serves until a stop signal; returns the exit code. */
async function serveWithLog(
  config: ServeConfig,
  secrets: string[],
  log: Logger,
): Promise<number> {
  await fitLimits(config, log);
  let store: RunStore;
  try {
    store = await openForServe(config, log);
  } catch (error) {
    return reportFailure(error);
  }
  const context: ServeContext = { config, secrets, log, store };
  const services = await startRunServices(context);
  if (typeof services === "number") return services;
  return await serveUntilSignal(context, services);
}

/**
 * Starts assets, the daemon hub (when enabled) and the run manager; returns
 * the exit code instead when the hub cannot start.
 */
async function startRunServices(
  { config, secrets, log, store }: ServeContext,
): Promise<RunServices | number> {
  const metrics = createMetrics();
  const assets = createAssetsHook({ log });
  const warmPool = createWarmPool({ ...config.warmAgents, log });
  let hub: HubListener | undefined;
  let fleet: FleetDuties | undefined;
  if (config.daemon.enabled) {
    try {
      hub = startHubListener({
        host: config.daemon.host,
        port: config.daemon.port,
        token: config.daemon.token,
        tokens: config.daemon.tokens,
        loopbackWithoutToken: config.daemon.loopbackWithoutToken,
        maxJobsPerDaemon: config.daemon.maxJobsPerId,
        maxDaemons: config.daemon.maxConnected,
        limits: {
          // Room for each kept daemon plus as many connections being refused.
          maxConnections: Math.min(
            config.limits.maxConnections,
            2 * config.daemon.maxConnected,
          ),
          headerTimeoutMs: config.limits.headerTimeout * 1000,
        },
        dataDir: config.dataDir,
        mcpHandler: hubMcpHandlerFor((runId) => assets.backendForRun(runId)),
        onChange: () => fleet?.syncSoon(),
        log,
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
      await store.close();
      return reportFailure(error);
    }
    announceHub(config, hub.server.url, log);
  }
  const agentRegistry: RegistryContext = {
    dataDir: config.dataDir,
    onNote: (note) => log({ level: "warn", msg: note }),
    onProgress: registryDownloadLog(log),
  };
  const manager = createRunManager({
    assets,
    locations: runnerLocations(
      hub ? createDaemonLocation({ hub: hub.hub, assets, log }) : undefined,
    ),
    store,
    registry: metrics.countAgents(
      createReaperRegistry(join(config.dataDir, "agents")),
    ),
    secrets,
    log,
    warmPool,
    agentRegistry,
  });
  if (store.fleet) {
    fleet = startFleetDuties({
      store,
      fleet: store.fleet,
      manager,
      hub: hub?.hub,
      log,
      warmAgents: warmPool,
    });
  }
  const describeAcpTarget = createTargetDescriber({
    registry: createReaperRegistry(join(config.dataDir, "agents")),
    resolveRegistry: (wanted) => resolveRegistryProvider(wanted, agentRegistry),
  });
  return { metrics, assets, hub, manager, fleet, warmPool, describeAcpTarget };
}

/**
 * Logs where the hub listens and which token it wants (never the token: the
 * kept one by its file, which `runner daemon` on this machine reads); warns
 * when it takes daemons without one.
 */
function announceHub(config: ServeConfig, url: string, log: Logger): void {
  const { daemon } = config;
  log({
    msg: "daemon hub listening",
    url,
    ...(daemon.tokenSource === "data-dir"
      ? { daemon_token_file: daemonTokenPath(config.dataDir) }
      : {}),
  });
  if (!daemon.token && !Object.keys(daemon.tokens).length) {
    log({
      msg:
        "daemon hub without a token (--daemon-loopback-without-token): any process on this machine may connect as any daemon ID and receive its runs",
      level: "warn",
      always: true,
    });
  }
}

/**
 * Serves the HTTP API until SIGTERM/SIGINT, then shuts down gracefully;
 * returns the exit code.
 */
async function serveUntilSignal(
  context: ServeContext,
  services: RunServices,
): Promise<number> {
  const { config, secrets, log, store } = context;
  const { metrics, assets, hub, manager, fleet, warmPool } = services;
  let shuttingDown = false;
  const stopping = new AbortController();
  const app = createServerApp({
    stopping: stopping.signal,
    manager,
    store,
    config,
    metrics,
    log,
    secrets,
    isShuttingDown: () => shuttingDown,
    warmAgents: warmPool,
    describeAcpTarget: services.describeAcpTarget,
    daemons: hub && (fleet?.daemons ?? {
      list: () => Promise.resolve(describeDaemons(hub!.hub)),
      unfence: (daemonId) => hub!.hub.unfence(daemonId),
    }),
  });
  let listener: HttpListener;
  try {
    listener = listen(config, app.fetch, log);
  } catch (error) {
    await warmPool.close();
    await hub?.close();
    await assets.close();
    await store.close();
    return reportFailure(error);
  }
  metrics.observeListener("http", () => listener.stats());
  // The ACP client (the SDK and its schemas) loads now, while the server
  // idles, not on the first run's way to its agent's `initialize`.
  preloadAcpClient();
  if (hub) metrics.observeListener("hub", () => hub.server.stats());
  // A fleet's replicas sweep runs of lost replicas in their fleet duties.
  const sweep = store.fleet
    ? undefined
    : setInterval(() => void failOrphanedRuns(store, { log }), ORPHAN_SWEEP_MS);
  const retention = startRetention({
    store,
    settings: config.retention,
    metrics,
    log,
  });
  const stopSignals = listenForStopSignals(log);
  // Another live process took this replica id: stop serving as it.
  const displaced = fleet?.identityLost.then(() => "replica_id_taken");
  const signal = await Promise.race(
    displaced ? [stopSignals.first, displaced] : [stopSignals.first],
  );

  // Still listening while runs drain: /healthz answers 503, new runs are refused.
  shuttingDown = true;
  clearInterval(sweep);
  const retentionStopped = retention.stop();
  log({
    msg: "shutting down",
    always: true,
    signal,
    active_runs: manager.active().length,
  });
  stopping.abort();
  await drainAndClose(services, listener);
  await retentionStopped;
  await closeStore(store, log);
  stopSignals.remove();
  log({ msg: "stopped", always: true });
  if (signal === "replica_id_taken") {
    console.error(
      "runner serve [runner.replica_id_taken]: another live process took this --replica-id; give each replica its own.",
    );
    return 1;
  }
  return 0;
}

/** Ends the active runs, then closes the warm agents, listener, fleet duties, hub and assets. */
async function drainAndClose(
  services: RunServices,
  listener: HttpListener,
): Promise<void> {
  const { manager, warmPool, fleet, hub, assets } = services;
  await manager.shutdown(
    new RunnerError(
      "runner.shutting_down",
      "The runner is shutting down; start the run again once it is back.",
    ),
  );
  // Idle agents go too: none outlives the runner.
  await warmPool.close();
  await listener.close();
  await fleet?.stop();
  await hub?.close();
  await assets.close();
}

/** Closes the store; a final flush that fails is logged, not thrown. */
async function closeStore(store: RunStore, log: Logger): Promise<void> {
  try {
    await store.close();
  } catch (error) {
    log({
      msg: "closing the store failed; unwritten events are lost",
      level: "error",
      error: error instanceof Error ? error.message : String(error),
    });
  }
}

/** Listening for SIGTERM and SIGINT. */
interface StopSignals {
  /** Resolves with the name of the first signal. */
  first: Promise<string>;
  /** Stops listening. */
  remove(): void;
}

/** Listens for SIGTERM and SIGINT: the first stops gracefully, a second exits. */
function listenForStopSignals(log: Logger): StopSignals {
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
  return {
    first: stop.promise,
    remove() {
      Deno.removeSignalListener("SIGTERM", onTerm);
      Deno.removeSignalListener("SIGINT", onInt);
    },
  };
}

/** Logs a registry agent's download when it starts and when it is whole. */
function registryDownloadLog(
  log: (entry: Record<string, unknown>) => void,
): NonNullable<RegistryContext["onProgress"]> {
  const started = new Set<string>();
  return (progress) => {
    const name = `${progress.id} ${progress.version}`;
    if (!started.has(name)) {
      started.add(name);
      log({
        msg: "downloading registry agent",
        id: progress.id,
        version: progress.version,
      });
    }
    if (progress.total !== undefined && progress.received >= progress.total) {
      started.delete(name);
      log({
        msg: "downloaded registry agent",
        id: progress.id,
        version: progress.version,
        bytes: progress.received,
      });
    }
  };
}
