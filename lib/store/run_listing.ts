/**
 * The query behind `RunStore.listRuns`, for both stores: newest
 * first, ties broken by insertion order, each filter combination served by
 * an index of its own (`sqlite/schema.ts`, `postgres/schema.ts`), so a listing
 * reads only the rows it returns however many runs are stored. `daemonId`
 * reads the config of the rows it scans (no index); `before` pages by keyset.
 *
 * @module
 */

import type { ListRunsOptions } from "./types.ts";

/** A query's text and its positional parameter values. */
export interface StoreQuery {
  /** The SQL text (`?` placeholders for SQLite, `$n` for PostgreSQL). */
  text: string;
  /** The parameter values, in order. */
  values: (string | number)[];
}

/** The SQL dialect of a store: SQLite orders ties by `rowid`, PostgreSQL by `position`. */
export type StoreDialect = "sqlite" | "postgres";

/** The `SELECT` of `RunStore.listRuns` for `options`. */
export function listRunsQuery(
  options: ListRunsOptions,
  dialect: StoreDialect,
): StoreQuery {
  const values: (string | number)[] = [];
  const placeholder = () => dialect === "sqlite" ? "?" : `$${values.length}`;
  const conditions: string[] = [];
  if (options.conversationId !== undefined) {
    values.push(options.conversationId);
    conditions.push(`conversation_id = ${placeholder()}`);
  }
  if (options.status !== undefined) {
    values.push(options.status);
    conditions.push(`status = ${placeholder()}`);
  }
  const tie = dialect === "sqlite" ? "rowid" : "position";
  if (options.daemonId !== undefined) {
    values.push(options.daemonId);
    conditions.push(
      dialect === "sqlite"
        ? `json_extract(config_json, '$."daemon-id"') = ${placeholder()}`
        : `(config_json::jsonb ->> 'daemon-id') = ${placeholder()}`,
    );
  }
  if (options.before !== undefined) {
    values.push(options.before);
    conditions.push(
      `(created_at, ${tie}) < (SELECT created_at, ${tie} FROM runs WHERE run_id = ${placeholder()})`,
    );
  }
  values.push(Math.max(0, Math.floor(options.limit)));
  const limit = placeholder();
  const where = conditions.length ? `WHERE ${conditions.join(" AND ")} ` : "";
  return {
    text:
      `SELECT * FROM runs ${where}ORDER BY created_at DESC, ${tie} DESC LIMIT ${limit}`,
    values,
  };
}
