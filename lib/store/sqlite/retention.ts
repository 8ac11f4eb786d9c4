/**
 * Pruning the SQLite store: one batch of finished runs past the retention
 * bound, oldest first, deleted with their events in one transaction, then
 * the freed pages handed back to the file system (incremental vacuum). Every
 * statement is served by an index (`runs_by_created`, the events' primary
 * key), so a batch costs what it deletes, not what the store holds.
 *
 * @module
 */

import type { DatabaseSync, StatementSync } from "node:sqlite";
import { inTransaction } from "./schema.ts";
import type { PrunedRuns, PruneRunsOptions } from "../types.ts";

/** Pages handed back to the file system at most after one batch. */
const VACUUM_PAGES_PER_BATCH = 4096;

/** The statements of a prune (the query-plan test explains them). */
export const SQLITE_PRUNE_SQL = {
  /** The newest run past the newest N (`OFFSET N`): it and every older run are outside the count. */
  boundary:
    "SELECT created_at, rowid AS id FROM runs ORDER BY created_at DESC, rowid DESC LIMIT 1 OFFSET ?",
  /** One batch of finished runs at or before the bound `(created_at, rowid)`, oldest first. */
  candidates:
    `SELECT rowid AS id, run_id FROM runs WHERE created_at <= ? AND (created_at < ? OR rowid <= ?)
     AND status <> 'active' ORDER BY created_at, rowid LIMIT ?`,
  /** A run's events. */
  events: "DELETE FROM events WHERE run_id = ?",
  /** The run itself. */
  run: "DELETE FROM runs WHERE rowid = ?",
} as const;

/** What {@linkcode pruneSqliteRuns} works with. */
export interface SqlitePruneContext {
  /** The database. */
  db: DatabaseSync;
  /** A cached prepared statement. */
  statement(sql: string): StatementSync;
}

/** The last run to delete, in listing order: `(createdAt, id)` and every run before it. */
interface Bound {
  createdAt: number;
  id: number;
}

/** The later of the age bound and the count bound, if either selects anything. */
function pruneBound(
  { statement }: SqlitePruneContext,
  options: PruneRunsOptions,
): Bound | undefined {
  const bounds: Bound[] = [];
  if (options.createdBefore !== undefined) {
    bounds.push({
      createdAt: Math.ceil(options.createdBefore) - 1,
      id: Number.MAX_SAFE_INTEGER,
    });
  }
  if (options.keepNewest !== undefined) {
    const row = statement(SQLITE_PRUNE_SQL.boundary).get(
      Math.max(0, Math.floor(options.keepNewest)),
    ) as { created_at: number; id: number } | undefined;
    if (row) bounds.push({ createdAt: Number(row.created_at), id: row.id });
  }
  return bounds.reduce<Bound | undefined>(
    (later, bound) =>
      !later || bound.createdAt > later.createdAt ||
        (bound.createdAt === later.createdAt && bound.id > later.id)
        ? bound
        : later,
    undefined,
  );
}

/** The batch of runs to delete now, oldest first. */
function candidates(
  context: SqlitePruneContext,
  options: PruneRunsOptions,
): { id: number; run_id: string }[] {
  const bound = pruneBound(context, options);
  if (!bound || options.limit < 1) return [];
  return context.statement(SQLITE_PRUNE_SQL.candidates).all(
    bound.createdAt,
    bound.createdAt,
    bound.id,
    Math.floor(options.limit),
  ) as { id: number; run_id: string }[];
}

/** Deletes one batch of prunable runs with their events; see {@linkcode PruneRunsOptions}. */
export function pruneSqliteRuns(
  context: SqlitePruneContext,
  options: PruneRunsOptions,
): PrunedRuns {
  const { db, statement } = context;
  // A look without the write lock first: most passes find nothing to delete.
  if (!candidates(context, options).length) return { runs: 0, events: 0 };
  const pruned = inTransaction(db, () => {
    const result: PrunedRuns = { runs: 0, events: 0 };
    for (const row of candidates(context, options)) {
      result.events += Number(
        statement(SQLITE_PRUNE_SQL.events).run(row.run_id).changes,
      );
      result.runs += Number(
        statement(SQLITE_PRUNE_SQL.run).run(row.id).changes,
      );
    }
    return result;
  });
  // Each step of the pragma hands one freed page back to the file system.
  statement(`PRAGMA incremental_vacuum(${VACUUM_PAGES_PER_BATCH})`).all();
  return pruned;
}

/** The database's size in bytes: its pages (the file, once the WAL is checkpointed). */
export function sqliteSize({ statement }: SqlitePruneContext): number {
  const pages = statement("PRAGMA page_count").get() as { page_count: number };
  const size = statement("PRAGMA page_size").get() as { page_size: number };
  return Number(pages.page_count) * Number(size.page_size);
}
