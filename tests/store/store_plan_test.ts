/**
 * The embedded store stays fast however many runs it holds: on a store of
 * 200 000 runs (written directly as rows), every listing the HTTP API offers
 * and every other statement the request path prepares is served by an index
 * — no temporary B-tree for the order, no scan of the whole runs or events
 * table — by the query plan SQLite chooses, not by timing. Retention deletes
 * the oldest finished runs of such a store in batches.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { insertRunRows } from "../../scripts/bulk_runs.ts";
import { listRunsQuery } from "../../lib/store/run_listing.ts";
import { openStore, STORE_FILE_NAME } from "../../lib/store/open.ts";
import { SQLITE_PRUNE_SQL } from "../../lib/store/sqlite/retention.ts";
import type { ListRunsOptions, RunStore } from "../../lib/store/types.ts";
import { tempDir } from "../helpers.ts";
import { KEY } from "../store_suite.ts";

const RUNS = 200_000;

/** The store file of {@linkcode RUNS} runs (1 in 10 000 active), built once for this file. */
let template: string | undefined;

Deno.test.beforeAll(async () => {
  template = tempDir("runner-plan-test-");
  await (await openStore({ dataDir: template })).close();
  insertRunRows({
    path: join(template, STORE_FILE_NAME),
    count: RUNS,
    activeEvery: 10_000,
  });
});

Deno.test.afterAll(async () => {
  if (template) await Deno.remove(template, { recursive: true });
});

/** A data directory holding a copy of the {@linkcode RUNS}-run store. */
async function bigStore(): Promise<string> {
  const dataDir = tempDir("runner-plan-test-");
  await Deno.copyFile(
    join(template!, STORE_FILE_NAME),
    join(dataDir, STORE_FILE_NAME),
  );
  return dataDir;
}

/** What SQLite plans for `sql`: one line per step. */
function plan(db: DatabaseSync, sql: string): string[] {
  return (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all() as { detail: string }[])
    .map((row) => row.detail);
}

/**
 * Fails when a plan reads a whole table, or sorts in a temporary B-tree
 * (allowed for one conversation's sessions, a handful of rows, when `sorts`
 * says so).
 */
function assertIndexed(
  sql: string,
  steps: string[],
  sorts: "none" | "sessions" = "none",
): void {
  for (const step of steps) {
    if (!(sorts === "sessions" && /^\s*SELECT \* FROM sessions /.test(sql))) {
      assert.doesNotMatch(step, /TEMP B-TREE/, `${sql}\n${steps.join("\n")}`);
    }
    assert.doesNotMatch(
      step,
      /^SCAN (runs|events|sessions)$/,
      `${sql}\n${steps.join("\n")}`,
    );
  }
}

/** Every SQL text the store prepares while `body` runs. */
async function preparedDuring(body: () => Promise<void>): Promise<string[]> {
  const seen = new Set<string>();
  const prepare = DatabaseSync.prototype.prepare;
  DatabaseSync.prototype.prepare = function (this: DatabaseSync, sql: string) {
    seen.add(sql);
    return prepare.call(this, sql);
  };
  try {
    await body();
  } finally {
    DatabaseSync.prototype.prepare = prepare;
  }
  return [...seen];
}

Deno.test("every listing filter of GET /v1/runs is served by an index of its own on a 200 000-run store", async () => {
  const dataDir = await bigStore();
  const db = new DatabaseSync(join(dataDir, STORE_FILE_NAME));
  try {
    const listings: [ListRunsOptions, string][] = [
      [{ limit: 50 }, "runs_by_created"],
      [{ conversationId: "conv-7", limit: 50 }, "runs_by_conversation"],
      [{ status: "active", limit: 50 }, "runs_by_status"],
      [{ status: "failed", limit: 1000 }, "runs_by_status"],
      [
        { conversationId: "conv-7", status: "failed", limit: 50 },
        "runs_by_conversation_status",
      ],
    ];
    for (const [options, index] of listings) {
      const query = listRunsQuery(options, "sqlite");
      const steps = plan(db, query.text);
      assertIndexed(query.text, steps);
      assert.match(
        steps.join("\n"),
        new RegExp(`USING INDEX ${index}\\b`),
        JSON.stringify(options),
      );
    }
    for (const sql of Object.values(SQLITE_PRUNE_SQL)) {
      assertIndexed(sql, plan(db, sql));
    }
  } finally {
    db.close();
    await Deno.remove(dataDir, { recursive: true });
  }
});

Deno.test("no statement of the request path reads all runs: reads, listings, the health check, orphan checks, sessions", async () => {
  const dataDir = await bigStore();
  let store: RunStore | undefined;
  try {
    const prepared = await preparedDuring(async () => {
      store = await openStore({ dataDir });
      await store.createRun({ runId: "new", config: {}, status: "active" });
      store.appendEvent("new", {
        run_id: "",
        type: "message.delta",
        data: { text: "hi" },
      });
      await store.getRun("bulk-0000007");
      await store.getEvents("new", { after: 0, limit: 1 });
      await store.getEvents("new");
      await store.health();
      await store.size();
      for (
        const options of [
          { limit: 50 },
          { conversationId: "conv-1", limit: 1 },
          { conversationId: "conv-1", status: "active" as const, limit: 1 },
          { status: "active" as const, limit: 50 },
        ]
      ) {
        await store.listRuns(options);
      }
      await store.markActiveRunsFailed("runner.restarted", "x", {
        runId: "new",
      });
      await store.putSession(KEY, "sess-1");
      await store.getSession(KEY);
      await store.listSessions(KEY.conversationId);
      store.appendEvent("new", { run_id: "", type: "run.completed", data: {} });
      await store.finishRun("new", { status: "completed" });
    });
    const db = new DatabaseSync(join(dataDir, STORE_FILE_NAME));
    try {
      const statements = prepared.filter((sql) => !/^\s*PRAGMA/i.test(sql));
      assert.ok(statements.length >= 10, statements.join("\n"));
      for (const sql of statements) {
        assertIndexed(sql, plan(db, sql), "sessions");
      }
    } finally {
      db.close();
    }
  } finally {
    await store?.close();
    await Deno.remove(dataDir, { recursive: true });
  }
});

Deno.test("retention on a 200 000-run store deletes the oldest finished runs in batches and keeps the active ones", async () => {
  const dataDir = await bigStore();
  const store = await openStore({ dataDir });
  try {
    const first = await store.pruneRuns({ keepNewest: RUNS - 250, limit: 100 });
    assert.deepEqual(first, { runs: 100, events: 0 });
    await store.pruneRuns({ keepNewest: RUNS - 250, limit: 100 });
    // 250 past the newest: 249 finished (bulk-0000000 is active) in three batches.
    assert.deepEqual(
      await store.pruneRuns({ keepNewest: RUNS - 250, limit: 100 }),
      { runs: 49, events: 0 },
    );
    assert.equal((await store.getRun("bulk-0000000"))?.status, "active");
    assert.equal(await store.getRun("bulk-0000249"), undefined);
    assert.equal((await store.getRun("bulk-0000250"))?.status, "completed");
  } finally {
    await store.close();
    await Deno.remove(dataDir, { recursive: true });
  }
});
