/**
 * A replica's duties in a fleet (`runner serve --store postgres://…`): sweep
 * runs of replicas whose lease lapsed (`runner.replica_lost`, exactly once
 * fleet-wide), publish the daemons this replica holds, keep daemon fences
 * the same on every replica, answer `/v1/daemons` from the shared state, and
 * fail this replica's runs when it cannot renew its own lease. See
 * `docs/fleet.md`.
 *
 * @module
 */

import { RunnerError } from "../../errors.ts";
import type { Logger } from "../../log.ts";
import type { RelayHub } from "../../hub/relay_hub.ts";
import type { RunManager } from "../../run/manager.ts";
import { type DaemonsView, failOrphanedRuns } from "../../server/context.ts";
import type { FleetStore } from "../../store/fleet.ts";
import type { RunStore } from "../../store/types.ts";
import type { WarmAgentsView } from "../../run/warm/pool.ts";

/** Options of {@linkcode startFleetDuties}. */
export interface FleetDutiesOptions {
  /** The shared store. */
  store: RunStore;
  /** Its fleet state. */
  fleet: FleetStore;
  /** This replica's run manager. */
  manager: RunManager;
  /** The daemon hub, when `--daemon-enabled`. */
  hub?: RelayHub;
  /** The structured log. */
  log: Logger;
  /** This replica's warm agents (stopped when its lease is lost). */
  warmAgents?: WarmAgentsView;
}

/** A replica's running fleet duties. */
export interface FleetDuties {
  /** `/v1/daemons` over the whole fleet. */
  daemons: DaemonsView;
  /** Publishes this replica's daemons and fences now (after a hub change). */
  syncSoon(): void;
  /** Resolves when another live process took this replica id: stop serving. */
  identityLost: Promise<void>;
  /** Stops the timer and waits for a sync under way. */
  stop(): Promise<void>;
}

/** Starts the sweep and the daemon sync on a timer of a third of the lease. */
export function startFleetDuties(options: FleetDutiesOptions): FleetDuties {
  const { store, fleet, manager, log } = options;
  const fences = new FenceMirror(options);
  let stopped = false;
  let running: Promise<void> = Promise.resolve();
  const tick = () => {
    if (stopped) return running;
    running = running.then(async () => {
      // Runs of lapsed replicas: each ended exactly once fleet-wide.
      await failOrphanedRuns(store, { log });
      await fences.sync();
    }).catch((error) =>
      log({
        msg: "fleet sync failed",
        level: "warn",
        error: error instanceof Error ? error.message : String(error),
      })
    );
    return running;
  };
  const timer = setInterval(tick, fleet.leaseMs / 3);
  void tick();
  // Lost lease: everything this replica did under it is fenced, so its runs
  // stop (the fleet ends them) and its warm agents go (they may miss turns
  // taken elsewhere meanwhile).
  fleet.onLeaseLost(() => {
    const failure = new RunnerError(
      "runner.replica_lost",
      "This replica lost its fleet lease (it was paused or cut off from the database), so the fleet ended its runs; start the run again (any replica can take it).",
    );
    log({ msg: "replica lease lost; stopping active runs", level: "error" });
    for (const run of manager.active()) run.handle.cancel(failure);
    const warm = options.warmAgents;
    for (const agent of warm?.list() ?? []) void warm!.stop(agent.agent_id);
  });
  const identityLost = Promise.withResolvers<void>();
  fleet.onIdentityLost(() => identityLost.resolve());
  return {
    identityLost: identityLost.promise,
    daemons: fleetDaemonsView(fleet, options.hub),
    syncSoon: () => void tick(),
    async stop() {
      stopped = true;
      clearInterval(timer);
      await running;
    },
  };
}

/**
 * Keeps the hub's fences and the fleet's the same: fences set here are
 * published, fences set on other replicas are applied here, and a fence
 * lifted anywhere is lifted here.
 */
class FenceMirror {
  readonly #fleet: FleetStore;
  readonly #hub?: RelayHub;
  /** Fences known to be in the database (published or applied by this replica). */
  readonly #shared = new Set<string>();

  constructor(options: FleetDutiesOptions) {
    this.#fleet = options.fleet;
    this.#hub = options.hub;
  }

  async sync(): Promise<void> {
    const hub = this.#hub;
    if (!hub) return;
    const daemons = hub.listDaemons();
    await this.#fleet.syncDaemons(
      daemons.filter((daemon) => daemon.connected).map((daemon) => ({
        daemonId: daemon.daemonId,
        metadata: daemon.metadata as Record<string, unknown>,
        connectedAt: daemon.connectedAt,
        lastSeenAt: daemon.lastSeenAt,
        activeJobs: daemon.activeJobs,
      })),
    );
    const local = new Set(
      daemons.filter((daemon) => daemon.fenced).map((d) => d.daemonId),
    );
    for (const daemonId of local) {
      if (this.#shared.has(daemonId)) continue;
      await this.#fleet.addFence(daemonId);
      this.#shared.add(daemonId);
    }
    const remote = new Set(await this.#fleet.listFences());
    for (const daemonId of [...this.#shared]) {
      if (remote.has(daemonId)) continue;
      this.#shared.delete(daemonId);
      if (local.has(daemonId)) await hub.unfence(daemonId);
    }
    for (const daemonId of remote) {
      if (!local.has(daemonId)) hub.fence(daemonId);
      this.#shared.add(daemonId);
    }
  }
}

/** `/v1/daemons` from the fleet's shared state: the same answer on every replica. */
function fleetDaemonsView(fleet: FleetStore, hub?: RelayHub): DaemonsView {
  return {
    async list() {
      const [connected, fenced] = await Promise.all([
        fleet.listDaemons(),
        fleet.listFences(),
      ]);
      const fencedIds = new Set(fenced);
      const rows = connected.map((daemon) => ({
        daemon_id: daemon.daemonId,
        connected: true,
        fenced: fencedIds.has(daemon.daemonId),
        metadata: daemon.metadata,
        connected_at: daemon.connectedAt ?? null,
        last_seen_at: daemon.lastSeenAt ?? null,
        active_jobs: daemon.activeJobs,
        replica_id: daemon.replicaId,
      }));
      const seen = new Set(connected.map((daemon) => daemon.daemonId));
      for (const daemonId of fenced) {
        if (seen.has(daemonId)) continue;
        rows.push({
          daemon_id: daemonId,
          connected: false,
          fenced: true,
          metadata: {},
          connected_at: null,
          last_seen_at: null,
          active_jobs: [],
          replica_id: undefined,
        });
      }
      rows.sort((a, b) => a.daemon_id < b.daemon_id ? -1 : 1);
      return { daemons: rows };
    },
    async unfence(daemonId) {
      const here = hub ? await hub.unfence(daemonId) : false;
      const shared = await fleet.removeFence(daemonId);
      return here || shared;
    },
  };
}
