/**
 * What replicas of `runner serve` sharing one PostgreSQL store know of each
 * other: replica leases, the owner of each conversation, which replica holds
 * each daemon's socket, and the daemon fences. Implemented by the PostgreSQL
 * store (`postgres/fleet.ts`); see `docs/fleet.md`.
 *
 * @module
 */

/** How a replica opens the fleet's shared PostgreSQL store. */
export interface SharedStoreOptions {
  /** The connection URL (`postgres://user:pass@host:port/db`). */
  url: string;
  /** This replica's id. */
  replicaId: string;
  /** Where other replicas reach this one. */
  advertiseUrl: string;
  /** The replica lease, in milliseconds. */
  leaseMs: number;
  /** Keep queued events unwritten until a flush or a full queue (for tests; default: group commit). */
  holdEvents?: boolean;
  /** Structured log. */
  log?: (entry: Record<string, unknown>) => void;
}

/** A replica as the fleet knows it. */
export interface ReplicaRef {
  /** The replica's `--replica-id`. */
  replicaId: string;
  /** Where other replicas reach it (`--advertise-url`). */
  url: string;
  /** Whether its lease is current (false: it stopped renewing, presumed dead). */
  alive: boolean;
  /** Whether it is this replica. */
  self: boolean;
}

/** How this replica's lease renewals fare, as {@linkcode FleetStore.leaseHealth} tells. */
export interface LeaseHealth {
  /** False while renewals fail (until one succeeds again). */
  ok: boolean;
  /** Why the last renewal failed, when not ok. */
  error?: string;
  /** When a renewal last succeeded, ms since the epoch. */
  renewedAt: number;
}

/** A daemon connected to some replica of the fleet. */
export interface FleetDaemon {
  /** The daemon id. */
  daemonId: string;
  /** Its hello metadata. */
  metadata: Record<string, unknown>;
  /** When its socket connected, ms since the epoch. */
  connectedAt?: number;
  /** When it last sent a frame, ms since the epoch. */
  lastSeenAt?: number;
  /** Ids of its jobs in flight. */
  activeJobs: string[];
  /** The replica holding its socket (set by {@linkcode FleetStore.listDaemons}). */
  replicaId?: string;
}

/** The shared state of a fleet of replicas. */
export interface FleetStore {
  /** This replica's id and advertised URL. */
  readonly replicaId: string;
  /** This replica's advertised URL. */
  readonly url: string;
  /** The lease length, in milliseconds. */
  readonly leaseMs: number;
  /** Whether this replica's last lease renewal reached the database. */
  leaseHealth(): LeaseHealth;
  /**
   * Called once each time this replica's lease was lost: it could not be
   * renewed before it expired, or the fleet declared it lost. Everything
   * written under that lease is fenced from then on; the replica joins again
   * under a new lease for new runs.
   */
  onLeaseLost(listener: () => void): void;
  /**
   * Called once when another live process took this replica id: this process
   * must stop serving as that id.
   */
  onIdentityLost(listener: () => void): void;
  /**
   * Makes this replica the conversation's owner unless another live replica
   * holds a live lease on it (a lease of a replica whose own lease lapsed
   * does not count; `force`: take it anyway); resolves to the owner.
   */
  claimConversation(
    conversationId: string,
    options?: { force?: boolean },
  ): Promise<ReplicaRef>;
  /** Whether the replica's lease is live. */
  replicaAlive(replicaId: string): Promise<boolean>;
  /** The replicas whose lease is live, this one included, sorted by id. */
  liveReplicas(): Promise<ReplicaRef[]>;
  /** The conversation's owner, if it has one (alive or not). */
  conversationOwner(conversationId: string): Promise<ReplicaRef | undefined>;
  /** The replica running a run, if the run exists and is still active. */
  activeRunOwner(runId: string): Promise<ReplicaRef | undefined>;
  /** Replaces the daemons this replica holds with `daemons`. */
  syncDaemons(daemons: FleetDaemon[]): Promise<void>;
  /** Daemons held by live replicas, sorted by id. */
  listDaemons(): Promise<FleetDaemon[]>;
  /** The live replica holding the daemon's socket, if any. */
  daemonHolder(daemonId: string): Promise<ReplicaRef | undefined>;
  /** Records a fence (idempotent). */
  addFence(daemonId: string): Promise<void>;
  /** Lifts a fence; resolves to whether it existed. */
  removeFence(daemonId: string): Promise<boolean>;
  /** Every fenced daemon id, sorted. */
  listFences(): Promise<string[]>;
}
