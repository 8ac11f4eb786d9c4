/**
 * Transactions of the PostgreSQL store that survive their connection going
 * away.
 *
 * The `postgres` driver (3.4.x) ends a failed transaction with a `ROLLBACK`
 * on the same connection. When the failure is the connection closing (the
 * database stopped or ended the session mid-transaction), that `ROLLBACK` is
 * written to a socket the driver already dropped, and the driver throws a
 * `TypeError` from a timer callback, where nothing can catch it: the whole
 * process ends (upstream porsager/postgres#1154 and #1208). The database
 * rolls back a transaction whose session ended anyway, so
 * {@linkcode transaction} never lets the driver send that `ROLLBACK`: it
 * rejects with the connection error itself and leaves the driver's
 * transaction unsettled. Any other failure (a constraint, a fenced write)
 * rolls back as usual.
 *
 * @module
 */

import postgres from "postgres";

/**
 * Runs `body` in a transaction (`BEGIN` … `COMMIT`, `ROLLBACK` when it
 * throws) and resolves to what it returned.
 *
 * @throws what `body` threw; the driver's connection error when the
 * transaction's connection went away.
 */
export function transaction<T>(
  sql: postgres.Sql,
  body: (tx: postgres.TransactionSql) => Promise<T>,
): Promise<T> {
  let lost!: (error: unknown) => void;
  const connectionLost = new Promise<never>((_, reject) => lost = reject);
  const settled = sql.begin((tx) =>
    body(tx).catch((error) => {
      if (!isConnectionError(error)) throw error;
      lost(error);
      // Unsettled: a settled body makes the driver write ROLLBACK or COMMIT
      // to the connection that is gone.
      return new Promise<never>(() => {});
    })
  ) as Promise<T>;
  // Once the connection is lost, the driver also rejects `settled`: the
  // caller already has that failure from `connectionLost`.
  settled.catch(() => {});
  return Promise.race([settled, connectionLost]);
}

/**
 * Whether `error` says the connection failed rather than the statement: the
 * driver's connection errors (`CONNECTION_CLOSED`, `CONNECTION_DESTROYED`,
 * `CONNECTION_ENDED`, `CONNECT_TIMEOUT`) and the socket's own errors carry
 * an `errno`; an answer of the database is a `PostgresError`.
 */
function isConnectionError(error: unknown): boolean {
  return error instanceof Error && "errno" in error &&
    !(error instanceof postgres.PostgresError);
}
