/**
 * The fencing check of the PostgreSQL store: which of a replica's runs it may
 * still write. A run may be written only by the replica instance that created
 * it, under the lease epoch it was created in, while that lease is live;
 * the check locks the lease row (`FOR KEY SHARE`) until the write commits,
 * so a sweep that fences the lease waits for it. See `docs/fleet.md`.
 *
 * @module
 */

import type postgres from "postgres";

/**
 * The status of each of `runIds` this instance may write now, locking their
 * leases for the transaction; a run missing from the answer is fenced (its
 * lease lapsed or was declared lost, or another instance owns it).
 */
export async function writableRuns(
  tx: postgres.TransactionSql,
  owner: { instanceId: string; epoch: number | undefined },
  runIds: string[],
): Promise<Map<string, string>> {
  const { instanceId, epoch } = owner;
  // A lease this process declared lost is never written under again.
  if (epoch === undefined) return new Map();
  const rows = await tx`SELECT r.run_id, r.status FROM runs r
    JOIN replicas p ON p.replica_id = r.owner_replica
      AND p.instance_id = r.owner_instance AND p.epoch = r.owner_epoch
    WHERE r.run_id = ANY(${runIds}::text[]) AND r.owner_instance = ${instanceId}
      AND r.owner_epoch = ${epoch} AND p.expires_at > clock_timestamp()
    FOR KEY SHARE OF p`;
  return new Map(rows.map((row) => [String(row.run_id), String(row.status)]));
}

/**
 * Thrown inside a write transaction that must not commit: this process
 * declared the lease it wrote under lost while the transaction ran.
 */
export class LeaseLapsedDuringWrite extends Error {}

/** Rolls the transaction back (throws) unless `epoch` is still the live one. */
export function stillLive(
  fleet: { liveEpoch(): number | undefined },
  epoch: number | undefined,
): void {
  if (epoch === undefined || fleet.liveEpoch() !== epoch) {
    throw new LeaseLapsedDuringWrite("the lease lapsed during the write");
  }
}
