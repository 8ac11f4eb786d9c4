/**
 * Pruning the PostgreSQL store: one batch of finished runs past the
 * retention bound, oldest first, deleted with their events in one
 * transaction. Rows another replica is pruning at the same moment are
 * skipped (`SKIP LOCKED`); the space of deleted rows is reused by the
 * database (autovacuum), as PostgreSQL does.
 *
 * @module
 */

import type postgres from "postgres";
import type { PrunedRuns, PruneRunsOptions } from "../types.ts";
import { transaction } from "./transaction.ts";

/** The statements of a prune (the query-plan test explains them). */
export const POSTGRES_PRUNE_SQL = {
  /** The newest run past the newest N (`OFFSET N`): it and every older run are outside the count. */
  boundary: `SELECT created_at, position FROM runs
    ORDER BY created_at DESC, position DESC LIMIT 1 OFFSET $1`,
  /** One batch of finished runs at or before the bound `(created_at, position)`, oldest first. */
  candidates: `SELECT run_id FROM runs
    WHERE created_at <= $1::bigint AND (created_at < $1::bigint OR position <= $2::bigint)
    AND status <> 'active' ORDER BY created_at, position LIMIT $3
    FOR UPDATE SKIP LOCKED`,
  /** The batch's events. */
  events: "DELETE FROM events WHERE run_id = ANY($1::text[])",
  /** The batch's runs. */
  runs: "DELETE FROM runs WHERE run_id = ANY($1::text[])",
} as const;

/** The last run to delete, in listing order: `(createdAt, position)` and every run before it. */
interface Bound {
  createdAt: number;
  position: number;
}

/** The later of the age bound and the count bound, if either selects anything. */
async function pruneBound(
  tx: postgres.TransactionSql,
  options: PruneRunsOptions,
): Promise<Bound | undefined> {
  const bounds: Bound[] = [];
  if (options.createdBefore !== undefined) {
    bounds.push({
      createdAt: Math.ceil(options.createdBefore) - 1,
      position: Number.MAX_SAFE_INTEGER,
    });
  }
  if (options.keepNewest !== undefined) {
    const [row] = await tx.unsafe(POSTGRES_PRUNE_SQL.boundary, [
      Math.max(0, Math.floor(options.keepNewest)),
    ]);
    if (row) {
      bounds.push({
        createdAt: Number(row.created_at),
        position: Number(row.position),
      });
    }
  }
  return bounds.reduce<Bound | undefined>(
    (later, bound) =>
      !later || bound.createdAt > later.createdAt ||
        (bound.createdAt === later.createdAt &&
          bound.position > later.position)
        ? bound
        : later,
    undefined,
  );
}

/** Deletes one batch of prunable runs with their events; see {@linkcode PruneRunsOptions}. */
export function prunePostgresRuns(
  sql: postgres.Sql,
  options: PruneRunsOptions,
): Promise<PrunedRuns> {
  return transaction(sql, async (tx) => {
    const bound = await pruneBound(tx, options);
    if (!bound || options.limit < 1) return { runs: 0, events: 0 };
    const rows = await tx.unsafe(POSTGRES_PRUNE_SQL.candidates, [
      bound.createdAt,
      bound.position,
      Math.floor(options.limit),
    ]);
    if (!rows.length) return { runs: 0, events: 0 };
    const ids = rows.map((row) => String(row.run_id));
    const events = await tx.unsafe(POSTGRES_PRUNE_SQL.events, [ids]);
    const runs = await tx.unsafe(POSTGRES_PRUNE_SQL.runs, [ids]);
    return { runs: runs.count, events: events.count };
  });
}

/** The database's size in bytes. */
export async function postgresSize(sql: postgres.Sql): Promise<number> {
  const [row] = await sql`SELECT pg_database_size(current_database()) AS size`;
  return Number(row.size);
}
