/**
 * The fleet's shared state in PostgreSQL: this replica's lease (renewed on a
 * timer, with its conversations' leases), conversation ownership, daemon
 * presence and fences. Times are the database's clock, so replicas whose
 * clocks differ still agree on who is alive.
 *
 * @module
 */

import type postgres from "postgres";
import { RunnerError } from "../../errors.ts";
import type {
  FleetDaemon,
  FleetStore,
  LeaseHealth,
  ReplicaRef,
} from "../fleet.ts";
import { transaction } from "./transaction.ts";

type Row = Record<string, unknown>;

/** Options of {@linkcode PostgresFleet}. */
export interface PostgresFleetOptions {
  /** The connection pool. */
  sql: postgres.Sql;
  /** This replica's id. */
  replicaId: string;
  /** This process's instance id (a restart with the same replica id differs). */
  instanceId: string;
  /** Where other replicas reach this one. */
  url: string;
  /** The lease length in milliseconds (renewed every third of it). */
  leaseMs: number;
  /** Structured log. */
  log: (entry: Record<string, unknown>) => void;
}

/** The PostgreSQL {@linkcode FleetStore}; {@linkcode PostgresFleet.start} registers the replica. */
export class PostgresFleet implements FleetStore {
  readonly replicaId: string;
  readonly url: string;
  readonly leaseMs: number;
  /** This process's instance id. */
  readonly instanceId: string;
  readonly #options: PostgresFleetOptions;
  readonly #sql: postgres.Sql;
  readonly #leaseLost = new Set<() => void>();
  readonly #identityLost = new Set<() => void>();
  #timer: ReturnType<typeof setInterval> | undefined;
  #renewedAt = 0;
  /** Why the last lease renewal failed; undefined after a renewal succeeds. */
  #renewalError: string | undefined;
  /** The epoch of this replica's current lease (see `docs/fleet.md`, "Fencing"). */
  #epoch = 0;
  /** The epoch last declared lost here; it is never renewed again. */
  #lostEpoch: number | undefined;
  #renewing: Promise<void> | undefined;
  #identityGone = false;

  /** Makes the fleet view of one replica (nothing is written until start). */
  constructor(options: PostgresFleetOptions) {
    this.#options = options;
    this.#sql = options.sql;
    this.replicaId = options.replicaId;
    this.url = options.url;
    this.leaseMs = options.leaseMs;
    this.instanceId = options.instanceId;
  }

  /** The epoch of this replica's current lease. */
  get epoch(): number {
    return this.#epoch;
  }

  /**
   * The epoch this replica may write under now; undefined once it declared
   * that lease lost (until it joins again), whatever the database's row
   * says: a renewal whose answer was lost may have extended it there.
   */
  liveEpoch(): number | undefined {
    return this.#lostEpoch === this.#epoch ? undefined : this.#epoch;
  }

  /**
   * Registers this replica's lease and starts renewing it. A replica id
   * whose lease another process keeps renewing is refused; one whose lease
   * lapses (a previous instance that died) is taken once it has expired.
   *
   * @throws {RunnerError} `runner.replica_id_taken` when another live
   * process holds the id.
   */
  async start(): Promise<void> {
    const { replicaId, url } = this.#options;
    let seen: string | undefined;
    while (!await this.#takeLease()) {
      const [held] = await this.#sql`SELECT instance_id,
        expires_at::text AS expires FROM replicas WHERE replica_id = ${replicaId}`;
      if (!held) continue;
      const mark = `${held.instance_id} ${held.expires}`;
      // Renewed (or taken) while we waited: a live process holds the id.
      if (seen !== undefined && seen !== mark) throw idTaken(replicaId);
      seen = mark;
      await new Promise((resolve) => setTimeout(resolve, this.leaseMs / 6));
    }
    await this.#sql`UPDATE conversation_leases SET url = ${url}
      WHERE replica_id = ${replicaId}`;
    this.#renewedAt = Date.now();
    this.#timer = setInterval(() => void this.#renew(), this.leaseMs / 3);
  }

  /**
   * Takes this replica id's lease under a new epoch unless another instance
   * holds it live; resolves to whether it did. Taking it again after a loss
   * gives up the conversations held under the old lease.
   */
  async #takeLease(): Promise<boolean> {
    const { replicaId, instanceId, url } = this.#options;
    const [row] = await transaction(this.#sql, async (tx) => {
      const rows = await tx`INSERT INTO replicas
        (replica_id, instance_id, url, started_at, expires_at, epoch)
        VALUES (${replicaId}, ${instanceId}, ${url}, now(), ${this.#expiry()}, 0)
        ON CONFLICT (replica_id) DO UPDATE SET instance_id = excluded.instance_id,
          url = excluded.url, started_at = excluded.started_at,
          expires_at = excluded.expires_at, epoch = replicas.epoch + 1
        WHERE replicas.instance_id = excluded.instance_id
          OR replicas.expires_at <= clock_timestamp()
        RETURNING epoch`;
      if (rows.length && this.#lostEpoch !== undefined) {
        await tx`DELETE FROM conversation_leases
          WHERE replica_id = ${replicaId}`;
      }
      return rows;
    });
    if (!row) return false;
    this.#epoch = Number(row.epoch);
    return true;
  }

  /**
   * A condition true while this replica's current lease is live; every
   * write an owner makes is conditional on it (or on the run's lease).
   */
  ownLease(): postgres.PendingQuery<postgres.Row[]> {
    const { replicaId, instanceId } = this.#options;
    if (this.liveEpoch() === undefined) return this.#sql`false`;
    return this.#sql`EXISTS (SELECT 1 FROM replicas p
      WHERE p.replica_id = ${replicaId} AND p.instance_id = ${instanceId}
      AND p.epoch = ${this.#epoch} AND p.expires_at > clock_timestamp())`;
  }

  /** Checks the lease now (a write found itself fenced). */
  checkLease(): void {
    void this.#renew();
  }

  /** Stops renewing; `release` gives up the lease and conversations at once. */
  async stop(release: boolean): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    if (!release) return;
    const { replicaId, instanceId } = this.#options;
    // Only while the lease is this process's: never another's conversations.
    await this.#sql`DELETE FROM conversation_leases
      WHERE replica_id = ${replicaId} AND ${this.ownLease()}`;
    await this.#sql`DELETE FROM daemons WHERE replica_id = ${replicaId}
      AND instance_id = ${instanceId}`;
    await this.#sql`UPDATE replicas SET expires_at = now()
      WHERE replica_id = ${replicaId} AND instance_id = ${instanceId}`;
  }

  leaseHealth(): LeaseHealth {
    return this.#renewalError === undefined
      ? { ok: true, renewedAt: this.#renewedAt }
      : { ok: false, error: this.#renewalError, renewedAt: this.#renewedAt };
  }

  onLeaseLost(listener: () => void): void {
    this.#leaseLost.add(listener);
  }

  onIdentityLost(listener: () => void): void {
    this.#identityLost.add(listener);
  }

  #renew(): Promise<void> {
    if (this.#identityGone) return Promise.resolve();
    this.#renewing ??= this.#renewOnce().finally(() =>
      this.#renewing = undefined
    );
    return this.#renewing;
  }

  /**
   * Renews the current lease while it is live; a lease that lapsed or was
   * declared lost by the fleet is never renewed: this replica reports it
   * lost and joins again under a new epoch.
   */
  async #renewOnce(): Promise<void> {
    const { replicaId, instanceId, log } = this.#options;
    try {
      const renewed = this.#lostEpoch !== this.#epoch &&
        await transaction(this.#sql, async (tx) => {
          const lease = await tx`UPDATE replicas
            SET expires_at = ${this.#expiry()}
            WHERE replica_id = ${replicaId} AND instance_id = ${instanceId}
            AND epoch = ${this.#epoch} AND expires_at > clock_timestamp()`;
          if (lease.count === 0) return false;
          await tx`UPDATE conversation_leases
            SET expires_at = ${this.#expiry()} WHERE replica_id = ${replicaId}`;
          return true;
        });
      if (!renewed && !await this.#rejoin()) return;
      this.#renewedAt = Date.now();
      this.#renewalError = undefined;
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      this.#renewalError =
        `Could not renew the replica lease in PostgreSQL: ${reason}`;
      log({
        msg: "replica lease renewal failed",
        level: "error",
        error: reason,
      });
      if (Date.now() - this.#renewedAt > this.leaseMs) this.#declareLost();
    }
  }

  /** Reports the current lease lost (once per epoch). */
  #declareLost(): void {
    if (this.#lostEpoch === this.#epoch) return;
    this.#lostEpoch = this.#epoch;
    this.#options.log({
      msg: "replica lease lost; its runs are fenced",
      level: "error",
      replica_id: this.replicaId,
      epoch: this.#epoch,
    });
    for (const listener of this.#leaseLost) listener();
  }

  /**
   * After the lease was lost: joins again under a new epoch, or stops for
   * good when another live process holds the id; resolves to whether this
   * replica holds a lease again.
   */
  async #rejoin(): Promise<boolean> {
    const { replicaId, instanceId, log } = this.#options;
    this.#declareLost();
    if (await this.#takeLease()) {
      log({
        msg: "rejoined the fleet",
        replica_id: replicaId,
        epoch: this.#epoch,
      });
      return true;
    }
    const [held] = await this.#sql`SELECT instance_id FROM replicas
      WHERE replica_id = ${replicaId}`;
    if (held && held.instance_id !== instanceId && !this.#identityGone) {
      this.#identityGone = true;
      clearInterval(this.#timer);
      log({
        msg: "another live process took this replica id; stopping",
        level: "error",
        code: "runner.replica_id_taken",
        replica_id: replicaId,
      });
      for (const listener of this.#identityLost) listener();
    }
    return false;
  }

  #expiry() {
    return this
      .#sql`now() + ${this.leaseMs}::double precision * interval '1 millisecond'`;
  }

  #ref(row: Row): ReplicaRef {
    return {
      replicaId: String(row.replica_id),
      url: String(row.url),
      alive: Boolean(row.alive),
      self: row.replica_id === this.replicaId,
    };
  }

  async claimConversation(
    conversationId: string,
    options: { force?: boolean } = {},
  ): Promise<ReplicaRef> {
    const force = Boolean(options.force);
    // Only under a live lease: a fenced replica takes no conversation.
    const claimed = await this.#sql`INSERT INTO conversation_leases
      (conversation_id, replica_id, url, expires_at)
      SELECT ${conversationId}, ${this.replicaId}, ${this.url}, ${this.#expiry()}
      WHERE ${this.ownLease()}
      ON CONFLICT (conversation_id) DO UPDATE SET replica_id = excluded.replica_id,
        url = excluded.url, expires_at = excluded.expires_at
      WHERE conversation_leases.replica_id = excluded.replica_id
        OR conversation_leases.expires_at < now() OR ${force}
        OR NOT EXISTS (SELECT 1 FROM replicas p
          WHERE p.replica_id = conversation_leases.replica_id
          AND p.expires_at > now())
      RETURNING replica_id`;
    if (claimed.count === 1) {
      return {
        replicaId: this.replicaId,
        url: this.url,
        alive: true,
        self: true,
      };
    }
    const [live] = await this.#sql`SELECT ${this.ownLease()} AS live`;
    if (!live.live) {
      this.checkLease();
      throw leaseLost(this.replicaId);
    }
    const owner = await this.conversationOwner(conversationId);
    // Released between the two statements: try again.
    return owner ?? await this.claimConversation(conversationId, options);
  }

  async replicaAlive(replicaId: string): Promise<boolean> {
    const [row] = await this.#sql`SELECT expires_at > clock_timestamp() AS alive
      FROM replicas WHERE replica_id = ${replicaId}`;
    return Boolean(row?.alive);
  }

  async liveReplicas(): Promise<ReplicaRef[]> {
    const rows = await this.#sql`SELECT replica_id, url, true AS alive
      FROM replicas WHERE expires_at > clock_timestamp() ORDER BY replica_id`;
    return rows.map((row) => this.#ref(row));
  }

  async conversationOwner(
    conversationId: string,
  ): Promise<ReplicaRef | undefined> {
    // Alive while both its lease and its replica's lease are current.
    const [row] = await this.#sql`SELECT c.replica_id, c.url,
      (c.expires_at > now() AND EXISTS (SELECT 1 FROM replicas p
        WHERE p.replica_id = c.replica_id AND p.expires_at > now())) AS alive
      FROM conversation_leases c WHERE c.conversation_id = ${conversationId}`;
    return row ? this.#ref(row) : undefined;
  }

  async activeRunOwner(runId: string): Promise<ReplicaRef | undefined> {
    const [row] = await this.#sql`SELECT r.owner_replica AS replica_id,
      COALESCE(p.url, '') AS url,
      COALESCE(p.instance_id = r.owner_instance AND p.epoch = r.owner_epoch
        AND p.expires_at > now(), false) AS alive
      FROM runs r LEFT JOIN replicas p ON p.replica_id = r.owner_replica
      WHERE r.run_id = ${runId} AND r.status = 'active'`;
    return row ? this.#ref(row) : undefined;
  }

  async syncDaemons(daemons: FleetDaemon[]): Promise<void> {
    const { replicaId, instanceId } = this.#options;
    const ids = daemons.map((daemon) => daemon.daemonId);
    await transaction(this.#sql, async (tx) => {
      // Only under this process's live lease, held until the commit.
      const [lease] = await tx`SELECT 1 FROM replicas p
        WHERE ${this.ownLease()} AND p.replica_id = ${replicaId} FOR KEY SHARE`;
      if (!lease) return;
      await tx`DELETE FROM daemons WHERE replica_id = ${replicaId}
        AND instance_id = ${instanceId}
        AND NOT (daemon_id = ANY(${ids}::text[]))`;
      for (const daemon of daemons) {
        await tx`INSERT INTO daemons (daemon_id, replica_id, instance_id,
          metadata_json, connected_at, last_seen_at, active_jobs_json)
          VALUES (${daemon.daemonId}, ${replicaId}, ${instanceId},
            ${JSON.stringify(daemon.metadata)}, ${daemon.connectedAt ?? null},
            ${daemon.lastSeenAt ?? null}, ${JSON.stringify(daemon.activeJobs)})
          ON CONFLICT (daemon_id) DO UPDATE SET replica_id = excluded.replica_id,
            instance_id = excluded.instance_id,
            metadata_json = excluded.metadata_json,
            connected_at = excluded.connected_at,
            last_seen_at = excluded.last_seen_at,
            active_jobs_json = excluded.active_jobs_json`;
      }
    });
  }

  async listDaemons(): Promise<FleetDaemon[]> {
    const rows = await this.#sql`SELECT d.* FROM daemons d JOIN replicas p
      ON p.replica_id = d.replica_id AND p.instance_id = d.instance_id
      AND p.expires_at > now() ORDER BY d.daemon_id`;
    return rows.map((row) => ({
      daemonId: String(row.daemon_id),
      replicaId: String(row.replica_id),
      metadata: JSON.parse(String(row.metadata_json)),
      connectedAt: row.connected_at === null
        ? undefined
        : Number(row.connected_at),
      lastSeenAt: row.last_seen_at === null
        ? undefined
        : Number(row.last_seen_at),
      activeJobs: JSON.parse(String(row.active_jobs_json)),
    }));
  }

  async daemonHolder(daemonId: string): Promise<ReplicaRef | undefined> {
    const [row] = await this.#sql`SELECT p.replica_id, p.url, true AS alive
      FROM daemons d JOIN replicas p ON p.replica_id = d.replica_id
      AND p.instance_id = d.instance_id AND p.expires_at > now()
      WHERE d.daemon_id = ${daemonId}`;
    return row ? this.#ref(row) : undefined;
  }

  async addFence(daemonId: string): Promise<void> {
    await this.#sql`INSERT INTO daemon_fences (daemon_id, replica_id, fenced_at)
      VALUES (${daemonId}, ${this.replicaId}, ${Date.now()})
      ON CONFLICT (daemon_id) DO NOTHING`;
  }

  async removeFence(daemonId: string): Promise<boolean> {
    const removed = await this.#sql`DELETE FROM daemon_fences
      WHERE daemon_id = ${daemonId}`;
    return removed.count > 0;
  }

  async listFences(): Promise<string[]> {
    const rows = await this.#sql`SELECT daemon_id FROM daemon_fences
      ORDER BY daemon_id`;
    return rows.map((row) => String(row.daemon_id));
  }
}

/** The refusal of a replica id another live process holds. */
function idTaken(replicaId: string): RunnerError {
  return new RunnerError(
    "runner.replica_id_taken",
    `Replica id ${replicaId} is held by another live runner process (its lease is being renewed); give each replica its own --replica-id (RUNNER_REPLICA_ID), or leave it unset for a unique default.`,
  );
}

/** The refusal of a write by a replica whose lease lapsed. */
export function leaseLost(replicaId: string): RunnerError {
  return new RunnerError(
    "runner.lease_lost",
    `Replica ${replicaId} lost its fleet lease (it was paused or cut off from PostgreSQL) and is joining again; retry shortly, on any replica.`,
  );
}
