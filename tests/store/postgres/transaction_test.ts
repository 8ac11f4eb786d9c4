import assert from "node:assert/strict";
import postgres from "postgres";
import { transaction } from "../../../lib/store/postgres/transaction.ts";
import { eventually } from "../../fleet_helpers.ts";
import { clusterForThisFile, pgTest } from "../../pg_helpers.ts";
import { startTcpProxy } from "../../tcp_proxy_helpers.ts";

const cluster = clusterForThisFile();

/** A pool of one connection on a new database, named `application` in `pg_stat_activity`. */
async function onePool(application: string): Promise<postgres.Sql> {
  const url = await cluster().newDatabase();
  const sql = postgres(url, {
    max: 1,
    onnotice: () => {},
    connection: { application_name: application },
  });
  await sql`CREATE TABLE notes (id INTEGER PRIMARY KEY)`;
  return sql;
}

pgTest(
  "a transaction whose connection is cut mid-statement rejects with the connection error, and the process goes on",
  async () => {
    const url = await cluster().newDatabase();
    const proxy = startTcpProxy(`http://127.0.0.1:${cluster().port}`);
    const sql = postgres(
      url.replace(/:\d+\//, `:${new URL(proxy.url).port}/`),
      {
        max: 1,
        onnotice: () => {},
        connection: { application_name: "tx-cut" },
        // A reconnect right after the cut may fail (retryable, as the store
        // reports it); it should not take the driver's 30 s to say so.
        connect_timeout: 5,
      },
    );
    const observer = postgres(url, { max: 1, onnotice: () => {} });
    try {
      await sql`CREATE TABLE notes (id INTEGER PRIMARY KEY)`;
      for (let attempt = 0; attempt < 3; attempt++) {
        const cutShort = transaction(sql, async (tx) => {
          await tx`INSERT INTO notes VALUES (${100 + attempt})`;
          await tx`SELECT pg_sleep(30)`;
        });
        await eventually(async () => {
          const [row] = await observer`SELECT count(*)::int AS sleeping
          FROM pg_stat_activity WHERE application_name = 'tx-cut'
          AND state = 'active' AND query LIKE '%pg_sleep%'`;
          return row.sleeping > 0 ? true : undefined;
        }, "the transaction's statement to run");
        proxy.cut();
        await assert.rejects(cutShort, (error: Error) => "errno" in error);
        // The pool connects again and a later transaction commits (a first
        // reconnect may fail with a connection error, which the store reports
        // as retryable); a ROLLBACK written to the dropped connection would
        // have ended this process.
        await eventually(async () => {
          try {
            await transaction(
              sql,
              (tx) =>
                tx`INSERT INTO notes VALUES (${attempt}) ON CONFLICT DO NOTHING`,
            );
            return true;
          } catch (error) {
            if (error instanceof Error && "errno" in error) return undefined;
            throw error;
          }
        }, "a transaction after the cut to commit");
      }
      const rows = await observer`SELECT id FROM notes ORDER BY id`;
      assert.deepEqual(rows.map((row) => row.id), [0, 1, 2]);
    } finally {
      await observer.end();
      await sql.end({ timeout: 1 });
      await proxy.close();
    }
  },
);

pgTest(
  "a statement that fails rolls its transaction back, and the connection serves the next one",
  async () => {
    const sql = await onePool("tx-rolled-back");
    const observer = postgres(
      `postgres://runner@127.0.0.1:${cluster().port}/postgres`,
      { max: 1, onnotice: () => {} },
    );
    /** Sessions of the pool left inside a transaction (a missing ROLLBACK). */
    const leftOpen = async () => {
      const [row] = await observer`SELECT count(*)::int AS open
      FROM pg_stat_activity
      WHERE application_name = 'tx-rolled-back' AND state LIKE 'idle in%'`;
      return row.open;
    };
    try {
      await sql`INSERT INTO notes VALUES (1)`;
      await assert.rejects(
        transaction(sql, async (tx) => {
          await tx`INSERT INTO notes VALUES (2)`;
          await tx`INSERT INTO notes VALUES (1)`;
        }),
        (error) => error instanceof postgres.PostgresError,
      );
      assert.equal(await leftOpen(), 0);
      await assert.rejects(
        transaction(sql, async (tx) => {
          await tx`INSERT INTO notes VALUES (3)`;
          throw new Error("the caller's own failure");
        }),
        /the caller's own failure/,
      );
      assert.equal(await leftOpen(), 0);
      const rows = await sql`SELECT id FROM notes ORDER BY id`;
      assert.deepEqual(rows.map((row) => row.id), [1]);
    } finally {
      await observer.end();
      await sql.end({ timeout: 1 });
    }
  },
);
