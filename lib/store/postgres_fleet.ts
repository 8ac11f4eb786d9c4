/**
 * The fleet's shared state in PostgreSQL: this replica's lease (renewed on a
 * timer, with its conversations' leases), conversation ownership, daemon
 * presence and fences. Times are the database's clock, so replicas whose
 * clocks differ still agree on who is alive.
 *
 * @module
 */

import type postgres from "postgres";
import type {
  FleetDaemon,
  FleetStore,
  LeaseHealth,
  ReplicaRef,
} from "./fleet.ts";

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
  #timer: ReturnType<typeof setInterval> | undefined;
  #renewedAt = 0;
  /** Why the last lease renewal failed; undefined after a renewal succeeds. */
  #renewalError: string | undefined;
  #lostReported = false;

  /** Makes the fleet view of one replica (nothing is written until start). */
  constructor(options: PostgresFleetOptions) {
    this.#options = options;
    this.#sql = options.sql;
    this.replicaId = options.replicaId;
    this.url = options.url;
    this.leaseMs = options.leaseMs;
    this.instanceId = options.instanceId;
  }

  /** Registers this replica's lease and starts renewing it. */
  async start(): Promise<void> {
    const { replicaId, instanceId, url } = this.#options;
    await this.#sql`INSERT INTO replicas
      (replica_id, instance_id, url, started_at, expires_at)
      VALUES (${replicaId}, ${instanceId}, ${url}, now(), ${this.#expiry()})
      ON CONFLICT (replica_id) DO UPDATE SET instance_id = excluded.instance_id,
        url = excluded.url, started_at = excluded.started_at,
        expires_at = excluded.expires_at`;
    await this.#sql`UPDATE conversation_leases SET url = ${url}
      WHERE replica_id = ${replicaId}`;
    this.#renewedAt = Date.now();
    this.#timer = setInterval(() => void this.#renew(), this.leaseMs / 3);
  }

  /** Stops renewing; `release` gives up the lease and conversations at once. */
  async stop(release: boolean): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    if (!release) return;
    const { replicaId, instanceId } = this.#options;
    await this
      .#sql`DELETE FROM conversation_leases WHERE replica_id = ${replicaId}`;
    await this.#sql`DELETE FROM daemons WHERE replica_id = ${replicaId}`;
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

  async #renew(): Promise<void> {
    const { replicaId, instanceId, log } = this.#options;
    try {
      const renewed = await this.#sql`UPDATE replicas
        SET expires_at = ${this.#expiry()}
        WHERE replica_id = ${replicaId} AND instance_id = ${instanceId}`;
      if (renewed.count === 0) {
        log({
          msg: "another process took this replica id; renewing it back",
          level: "error",
          replica_id: replicaId,
        });
        await this.start();
        clearInterval(this.#timer);
      }
      await this
        .#sql`UPDATE conversation_leases SET expires_at = ${this.#expiry()}
        WHERE replica_id = ${replicaId}`;
      this.#renewedAt = Date.now();
      this.#renewalError = undefined;
      this.#lostReported = false;
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      this.#renewalError =
        `Could not renew the replica lease in PostgreSQL: ${reason}`;
      log({
        msg: "replica lease renewal failed",
        level: "error",
        error: reason,
      });
      if (!this.#lostReported && Date.now() - this.#renewedAt > this.leaseMs) {
        this.#lostReported = true;
        for (const listener of this.#leaseLost) listener();
      }
    }
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
    const claimed = await this.#sql`INSERT INTO conversation_leases
      (conversation_id, replica_id, url, expires_at)
      VALUES (${conversationId}, ${this.replicaId}, ${this.url}, ${this.#expiry()})
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
    const owner = await this.conversationOwner(conversationId);
    // Released between the two statements: try again.
    return owner ?? await this.claimConversation(conversationId, options);
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
      COALESCE(p.instance_id = r.owner_instance AND p.expires_at > now(), false)
        AS alive
      FROM runs r LEFT JOIN replicas p ON p.replica_id = r.owner_replica
      WHERE r.run_id = ${runId} AND r.status = 'active'`;
    return row ? this.#ref(row) : undefined;
  }

  async syncDaemons(daemons: FleetDaemon[]): Promise<void> {
    const { replicaId, instanceId } = this.#options;
    const ids = daemons.map((daemon) => daemon.daemonId);
    await this.#sql.begin(async (tx) => {
      await tx`DELETE FROM daemons WHERE replica_id = ${replicaId}
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
