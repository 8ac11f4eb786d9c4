import assert from "node:assert/strict";
import postgres from "postgres";
import { RunnerError } from "../../lib/errors.ts";
import { POSTGRES_PRUNE_SQL } from "../../lib/store/postgres/retention.ts";
import { POSTGRES_SCHEMA_VERSION } from "../../lib/store/postgres/schema.ts";
import { listRunsQuery } from "../../lib/store/run_listing.ts";
import type { ListRunsOptions, RunStore } from "../../lib/store/types.ts";
import {
  clusterForThisFile,
  openReplicaStore,
  pgTest,
  withReplicaStores,
} from "../pg_helpers.ts";
import { defineStoreSuite, event, localSessionKey } from "../store_suite.ts";

const cluster = clusterForThisFile();

defineStoreSuite({
  name: "postgres",
  async fresh() {
    const url = await cluster().newDatabase();
    let opened = 0;
    return {
      open: (options) => openReplicaStore(url, `replica-${++opened}`, options),
      async refuseWrites() {
        // As a full disk: inserts and updates of runs and events fail, reads go on.
        await withSql(
          url,
          (sql) =>
            sql.unsafe(`CREATE FUNCTION refuse_writes() RETURNS trigger
            LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'disk full'; END $$;
            CREATE TRIGGER refuse_events BEFORE INSERT OR UPDATE OR DELETE
              ON events FOR EACH ROW EXECUTE FUNCTION refuse_writes();
            CREATE TRIGGER refuse_runs BEFORE INSERT OR UPDATE OR DELETE
              ON runs FOR EACH ROW EXECUTE FUNCTION refuse_writes();`).then(
              () => {},
            ),
        );
        return () =>
          withSql(
            url,
            (sql) =>
              sql.unsafe(`DROP TRIGGER refuse_events ON events;
              DROP TRIGGER refuse_runs ON runs;
              DROP FUNCTION refuse_writes();`).then(() => {}),
          );
      },
      remove: () => Promise.resolve(),
    };
  },
});

pgTest(
  "[postgres] a new database is migrated and the version is recorded once",
  async () => {
    const url = await cluster().newDatabase();
    await (await openReplicaStore(url, "a")).close();
    await (await openReplicaStore(url, "b")).close();
    const sql = postgres(url, { onnotice: () => {} });
    try {
      const rows = await sql`SELECT version FROM runner_schema_version`;
      assert.deepEqual(
        rows.map((row) => row.version),
        Array.from({ length: POSTGRES_SCHEMA_VERSION }, (_, i) => i + 1),
      );
      await sql`INSERT INTO runner_schema_version (version)
      VALUES (${POSTGRES_SCHEMA_VERSION + 1})`;
    } finally {
      await sql.end();
    }
    await assert.rejects(() => openReplicaStore(url, "c"), (error) => {
      assert.ok(error instanceof RunnerError);
      assert.equal(error.code, "store.schema_too_new");
      return true;
    });
  },
);

pgTest(
  "[postgres] an unreachable database fails with store.unavailable",
  async () => {
    const url = await cluster().newDatabase();
    const wrongPort = url.replace(`:${cluster().port}/`, ":1/");
    await assert.rejects(() => openReplicaStore(wrongPort, "a"), (error) => {
      assert.ok(error instanceof RunnerError);
      assert.equal(error.code, "store.unavailable");
      assert.equal(error.retryable, true);
      return true;
    });
  },
);

pgTest(
  "[postgres] runs of a replica whose lease lapsed are failed exactly once",
  async () => {
    const url = await cluster().newDatabase();
    const lost = await openReplicaStore(url, "lost", { leaseMs: 300 });
    await lost.createRun({ runId: "orphan", config: {}, status: "active" });
    lost.appendEvent("orphan", event("message.delta", { text: "hi" }));
    await lost.flush();
    // The replica dies without closing: its lease is never renewed again.
    await (lost.fleet as unknown as { stop(release: boolean): Promise<void> })
      .stop(false);
    const sweepers = await Promise.all(
      ["a", "b", "c"].map((id) => openReplicaStore(url, id)),
    );
    try {
      await sweepers[0].createRun({
        runId: "alive",
        config: {},
        status: "active",
      });
      const sql = postgres(url, { onnotice: () => {} });
      try {
        await sql`UPDATE replicas SET expires_at = now() WHERE replica_id = 'lost'`;
      } finally {
        await sql.end();
      }
      const failed = await Promise.all(
        sweepers.map((store) =>
          store.markActiveRunsFailed("runner.replica_lost", "lost")
        ),
      );
      assert.deepEqual(failed.flat(), ["orphan"]);
      const events = await sweepers[1].getEvents("orphan");
      assert.deepEqual(events.map((e) => [e.sequence, e.type]), [
        [1, "message.delta"],
        [2, "run.failed"],
      ]);
      assert.equal(events[1].data.code, "runner.replica_lost");
      assert.equal((await sweepers[2].getRun("orphan"))?.status, "failed");
      assert.equal((await sweepers[2].getRun("alive"))?.status, "active");
    } finally {
      for (const store of sweepers) await store.close();
      await lost.close();
    }
  },
);

replicasTest("[postgres] a conversation has one owner until its lease lapses", [
  "a",
  "b",
], async ([a, b]) => {
  const claims = await Promise.all([
    a.fleet!.claimConversation("conv"),
    b.fleet!.claimConversation("conv"),
  ]);
  const owners = new Set(claims.map((claim) => claim.replicaId));
  assert.equal(owners.size, 1);
  const [owner] = owners;
  const other = owner === "a" ? b : a;
  const seen = await other.fleet!.claimConversation("conv");
  assert.deepEqual([seen.replicaId, seen.self, seen.alive], [
    owner,
    false,
    true,
  ]);
  const forced = await other.fleet!.claimConversation("conv", {
    force: true,
  });
  assert.equal(forced.self, true);
});

/**
 * A {@linkcode pgTest} on a fresh database with the stores of replicas `ids`
 * open (see {@linkcode withReplicaStores}).
 */
function replicasTest(
  name: string,
  ids: string[],
  body: (stores: RunStore[], url: string) => Promise<void>,
): void {
  pgTest(name, async () => {
    const url = await cluster().newDatabase();
    await withReplicaStores(url, ids, (stores) => body(stores, url));
  });
}

/** Runs SQL on the database at `url` with a connection of its own. */
async function withSql(
  url: string,
  body: (sql: postgres.Sql) => Promise<void>,
): Promise<void> {
  const sql = postgres(url, { onnotice: () => {} });
  try {
    await body(sql);
  } finally {
    await sql.end();
  }
}

/** A replica that dies without closing: its lease is never renewed again, and lapses now. */
async function loseReplica(url: string, store: RunStore): Promise<void> {
  await (store.fleet as unknown as { stop(release: boolean): Promise<void> })
    .stop(false);
  const replicaId = store.fleet!.replicaId;
  await withSql(
    url,
    (sql) =>
      sql`UPDATE replicas SET expires_at = now() WHERE replica_id = ${replicaId}`
        .then(() => {}),
  );
}

pgTest(
  "[postgres] a lost replica's run whose terminal event was stored is finished with it, not failed again",
  async () => {
    const url = await cluster().newDatabase();
    await withReplicaStores(
      url,
      ["lost", "sweeper"],
      async ([lost, sweeper]) => {
        await lost.createRun({ runId: "r1", config: {}, status: "active" });
        lost.appendEvent("r1", event("message.delta", { text: "hi" }));
        lost.appendEvent("r1", event("run.completed"));
        await lost.flush();
        // The replica dies here: the events are stored, finishRun never ran.
        await loseReplica(url, lost);
        assert.deepEqual(
          await sweeper.markActiveRunsFailed("runner.replica_lost", "lost"),
          ["r1"],
        );
        assert.equal((await sweeper.getRun("r1"))?.status, "completed");
        assert.deepEqual((await sweeper.getEvents("r1")).map((e) => e.type), [
          "message.delta",
          "run.completed",
        ]);
      },
    );
  },
);

pgTest(
  "[postgres] markActiveRunsFailed with a run id ends only that run of a lost replica",
  async () => {
    const url = await cluster().newDatabase();
    await withReplicaStores(
      url,
      ["lost", "sweeper"],
      async ([lost, sweeper]) => {
        await lost.createRun({ runId: "asked", config: {}, status: "active" });
        await lost.createRun({ runId: "other", config: {}, status: "active" });
        await loseReplica(url, lost);
        assert.deepEqual(
          await sweeper.markActiveRunsFailed("runner.replica_lost", "lost", {
            runId: "asked",
          }),
          ["asked"],
        );
        assert.equal(
          (await sweeper.getRun("asked"))?.code,
          "runner.replica_lost",
        );
        assert.equal((await sweeper.getRun("other"))?.status, "active");
      },
    );
  },
);

replicasTest(
  "[postgres] a conversation of a replica whose lease lapsed is taken at once, before the conversation's own lease ends",
  ["lost", "other"],
  async ([lost, other], url) => {
    assert.equal((await lost.fleet!.claimConversation("conv")).self, true);
    await loseReplica(url, lost);
    // The conversation's lease is still current; its replica's is not.
    const owner = await other.fleet!.conversationOwner("conv");
    assert.deepEqual([owner?.replicaId, owner?.alive], ["lost", false]);
    const claimed = await other.fleet!.claimConversation("conv");
    assert.deepEqual([claimed.replicaId, claimed.self], ["other", true]);
  },
);

pgTest(
  "[postgres] a schema-1 database is migrated in place: its runs and sessions are kept, new runs record their owning process and sessions remember values",
  async () => {
    const url = await cluster().newDatabase();
    await (await openReplicaStore(url, "a")).close();
    // Back to schema 1, with a run written by a runner of that schema.
    await withSql(url, async (sql) => {
      await sql`ALTER TABLE runs DROP COLUMN owner_pid`;
      await sql`ALTER TABLE runs DROP COLUMN owner_start_time`;
      await sql.unsafe(`DROP INDEX runs_by_created, runs_by_conversation_status,
        runs_by_conversation, runs_by_status;
      CREATE INDEX runs_by_conversation ON runs (conversation_id, created_at);
      CREATE INDEX runs_by_status ON runs (status, created_at);`);
      await sql`ALTER TABLE runs DROP COLUMN owner_epoch`;
      await sql`ALTER TABLE replicas DROP COLUMN epoch`;
      await sql`ALTER TABLE runs DROP COLUMN prompt`;
      await sql`ALTER TABLE sessions DROP COLUMN settings_json`;
      await sql`ALTER TABLE runs DROP COLUMN usage_json`;
      await sql`ALTER TABLE sessions DROP COLUMN cost_json`;
      await sql`DELETE FROM runner_schema_version WHERE version > 1`;
      await sql`INSERT INTO sessions (conversation_id, provider, location, target,
      workspace, agent_command, session_id, updated_at)
      VALUES ('c1', 'custom', 'local', '', '/w', 'agent', 'sess-old', 1)`;
      await sql`INSERT INTO runs (run_id, status, config_json, owner_replica,
      owner_instance, created_at, updated_at, finished_at)
      VALUES ('old', 'completed', '{}', 'a', 'gone', 1, 2, 2)`;
    });
    const store = await openReplicaStore(url, "b");
    try {
      assert.equal((await store.getRun("old"))?.finishedAt, 2);
      const key = localSessionKey("c1");
      assert.deepEqual(await store.getSession(key), {
        sessionId: "sess-old",
        updatedAt: 1,
      });
      await store.putSessionSettings(key, { mode: "plan" });
      assert.deepEqual((await store.getSession(key))?.settings, {
        mode: "plan",
      });
      await store.createRun({ runId: "new", config: {}, status: "active" });
      await withSql(url, async (sql) => {
        const [row] =
          await sql`SELECT owner_pid FROM runs WHERE run_id = 'new'`;
        assert.equal(row.owner_pid, Deno.pid);
        const versions = await sql`SELECT version FROM runner_schema_version
        ORDER BY version`;
        assert.deepEqual(
          versions.map((version) => version.version),
          Array.from({ length: POSTGRES_SCHEMA_VERSION }, (_, i) => i + 1),
        );
      });
    } finally {
      await store.close();
    }
  },
);

pgTest(
  "[postgres] while event writes fail, reads show only the stored events, durable() waits and health says why; a write that lands clears it",
  async () => {
    const url = await cluster().newDatabase();
    const store = await openReplicaStore(url, "a", { holdEvents: true });
    try {
      await store.createRun({ runId: "r1", config: {}, status: "active" });
      store.appendEvent("r1", event("message.delta", { text: "stored" }));
      await store.flush();
      assert.deepEqual(await store.health(), { ok: true });
      // Inserts of events fail from now on (as on a full disk); reads work.
      await withSql(url, async (sql) => {
        await sql.unsafe(`CREATE FUNCTION refuse() RETURNS trigger
        LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'disk full'; END $$;
        CREATE TRIGGER refuse BEFORE INSERT ON events
        FOR EACH ROW EXECUTE FUNCTION refuse();`);
      });
      store.appendEvent("r1", event("message.delta", { text: "queued" }));
      let committed = false;
      const durable = store.durable().then(() => committed = true);
      await assert.rejects(() => store.flush(), { code: "store.unavailable" });
      // Nobody sees an event that is not durable.
      assert.deepEqual(
        (await store.getEvents("r1")).map((e) => [e.sequence, e.data.text]),
        [[1, "stored"]],
      );
      assert.equal(committed, false);
      const health = await store.health();
      assert.equal(health.ok, false);
      assert.match(String(health.error), /disk full/);
      await withSql(
        url,
        (sql) => sql`DROP TRIGGER refuse ON events`.then(() => {}),
      );
      await store.flush();
      await durable;
      assert.deepEqual(
        (await store.getEvents("r1")).map((e) => [e.sequence, e.data.text]),
        [[1, "stored"], [2, "queued"]],
      );
      assert.deepEqual(await store.health(), { ok: true });
    } finally {
      await store.close();
    }
  },
);

/** A plan node of `EXPLAIN (FORMAT JSON)`. */
interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  "Index Name"?: string;
  "Plan Rows"?: number;
  Plans?: PlanNode[];
}

/** Every node of a plan, depth first. */
function planNodes(node: PlanNode): PlanNode[] {
  return [node, ...(node.Plans ?? []).flatMap(planNodes)];
}

/**
 * Fails when the plan of `text` reads the whole runs or events table, or
 * sorts more rows than it returns (`limit`): PostgreSQL may sort the handful
 * of rows an index found for a rare filter instead of walking the index in
 * order, never a table's worth.
 */
async function assertIndexedPlan(
  sql: postgres.Sql,
  text: string,
  values: unknown[],
  limit = 0,
): Promise<void> {
  const [row] = await sql.unsafe(
    `EXPLAIN (FORMAT JSON) ${text}`,
    values as postgres.ParameterOrJSON<never>[],
  );
  const nodes = planNodes(row["QUERY PLAN"][0].Plan);
  const shown = JSON.stringify(nodes.map((node) => node["Node Type"]));
  for (const node of nodes) {
    if (/Sort/.test(node["Node Type"])) {
      const sorted = node.Plans?.[0]?.["Plan Rows"] ?? Infinity;
      assert.ok(sorted <= limit, `${text}: sorts ${sorted} rows: ${shown}`);
    }
    assert.ok(
      !(node["Node Type"] === "Seq Scan" &&
        ["runs", "events"].includes(node["Relation Name"] ?? "")),
      `${text}: ${shown}`,
    );
  }
  assert.ok(
    nodes.some((node) => /Index/.test(node["Node Type"])),
    `${text}: ${shown}`,
  );
}

pgTest(
  "[postgres] every listing filter and the prune statements use an index on a 200 000-run database",
  async () => {
    const url = await cluster().newDatabase();
    await (await openReplicaStore(url, "a")).close();
    await withSql(url, async (sql) => {
      await sql.unsafe(`INSERT INTO runs (run_id, conversation_id, status,
        config_json, owner_replica, owner_instance, created_at, updated_at,
        finished_at)
      SELECT 'bulk-' || lpad(i::text, 7, '0'), 'conv-' || (i % 500),
        CASE WHEN i % 10000 = 0 THEN 'active'
          WHEN i % 97 = 0 THEN 'failed' ELSE 'completed' END,
        '{}', 'a', 'gone', 1700000000000 + i, 1700000000000 + i,
        CASE WHEN i % 10000 = 0 THEN NULL ELSE 1700000000000 + i END
      FROM generate_series(0, 199999) AS i`);
      await sql`ANALYZE runs`;
      const listings: ListRunsOptions[] = [
        { limit: 50 },
        { conversationId: "conv-7", limit: 50 },
        { status: "active", limit: 50 },
        { status: "completed", limit: 1000 },
        { conversationId: "conv-7", status: "failed", limit: 50 },
        { conversationId: "conv-7", status: "completed", limit: 50 },
      ];
      for (const options of listings) {
        const query = listRunsQuery(options, "postgres");
        await assertIndexedPlan(sql, query.text, query.values, options.limit);
      }
      await assertIndexedPlan(sql, POSTGRES_PRUNE_SQL.boundary, [100_000]);
      await assertIndexedPlan(sql, POSTGRES_PRUNE_SQL.candidates, [
        1700000100000,
        100_000,
        100,
      ]);
      await assertIndexedPlan(sql, POSTGRES_PRUNE_SQL.events, [[
        "bulk-0000001",
      ]]);
      await assertIndexedPlan(sql, POSTGRES_PRUNE_SQL.runs, [["bulk-0000001"]]);
    });
    // Retention on it: the 250 runs past the newest, less the active one, in batches.
    const store = await openReplicaStore(url, "b");
    try {
      const batch = { keepNewest: 200_000 - 250, limit: 100 };
      assert.deepEqual(await store.pruneRuns(batch), { runs: 100, events: 0 });
      assert.deepEqual(await store.pruneRuns(batch), { runs: 100, events: 0 });
      assert.deepEqual(await store.pruneRuns(batch), { runs: 49, events: 0 });
      assert.equal((await store.getRun("bulk-0000000"))?.status, "active");
      assert.equal(await store.getRun("bulk-0000249"), undefined);
      assert.equal((await store.getRun("bulk-0000250"))?.status, "completed");
    } finally {
      await store.close();
    }
  },
);

pgTest(
  "[postgres] a replica restarted under the same id fails its previous instance's runs, not its own",
  async () => {
    const url = await cluster().newDatabase();
    const before = await openReplicaStore(url, "r");
    await before.createRun({ runId: "old", config: {}, status: "active" });
    // It crashes (no release) and comes back at once as a new instance: the
    // replica id's lease is live again, but not for the old run's owner.
    await (before.fleet as unknown as { stop(release: boolean): Promise<void> })
      .stop(false);
    const after = await openReplicaStore(url, "r");
    const other = await openReplicaStore(url, "other");
    try {
      await after.createRun({ runId: "new", config: {}, status: "active" });
      assert.deepEqual(
        await other.markActiveRunsFailed("runner.replica_lost", "lost"),
        ["old"],
      );
      assert.equal((await other.getRun("old"))?.status, "failed");
      assert.equal((await other.getRun("new"))?.status, "active");
      assert.deepEqual(
        await after.markActiveRunsFailed("runner.replica_lost", "lost"),
        [],
        "the live instance's own run is not swept",
      );
    } finally {
      await other.close();
      await after.close();
      await before.close();
    }
  },
);

replicasTest(
  "[postgres] a conversation's lease is its id's alone: look-alike ids are other leases, the holder keeps it, and it frees when its own lease ends",
  ["a", "b"],
  async ([a, b], url) => {
    assert.equal((await a.fleet!.claimConversation("conv")).self, true);
    assert.equal(
      (await a.fleet!.claimConversation("conv")).self,
      true,
      "held",
    );
    const held = await b.fleet!.claimConversation("conv");
    assert.deepEqual([held.replicaId, held.self, held.alive], [
      "a",
      false,
      true,
    ]);
    // (Ids are checked at the HTTP edge: these are all valid ones.)
    for (const id of ["Conv", "conv-", "conv.", "con", "xconv", "conv:1"]) {
      const claim = await b.fleet!.claimConversation(id);
      assert.deepEqual(
        [claim.replicaId, claim.self],
        ["b", true],
        `${JSON.stringify(id)} is another conversation`,
      );
    }
    // Replica "a" is alive, but the conversation's own lease ran out.
    await withSql(
      url,
      (sql) =>
        sql`UPDATE conversation_leases SET expires_at = now() - interval '1 second'
        WHERE conversation_id = 'conv'`.then(() => {}),
    );
    const owner = await b.fleet!.conversationOwner("conv");
    assert.deepEqual([owner?.replicaId, owner?.alive], ["a", false]);
    const taken = await b.fleet!.claimConversation("conv");
    assert.deepEqual([taken.replicaId, taken.self], ["b", true]);
    const back = await a.fleet!.claimConversation("conv");
    assert.deepEqual(
      [back.replicaId, back.self],
      ["b", false],
      "b holds it now",
    );
  },
);

pgTest(
  "[postgres] a replica whose lease lapsed writes no session id and no daemon row",
  async () => {
    const url = await cluster().newDatabase();
    const lapsed = await openReplicaStore(url, "lapsed");
    const live = await openReplicaStore(url, "live");
    const key = (conversationId: string) =>
      localSessionKey(conversationId, "/ws");
    const daemon = { daemonId: "d1", metadata: {}, activeJobs: [] };
    try {
      await (lapsed.fleet as unknown as {
        stop(release: boolean): Promise<void>;
      })
        .stop(false);
      await withSql(url, async (sql) => {
        await sql`UPDATE replicas SET expires_at = now()
        WHERE replica_id = 'lapsed'`;
      });
      await lapsed.putSession(key("c1"), "stale-session");
      await lapsed.fleet!.syncDaemons([daemon]);
      assert.equal(await live.getSession(key("c1")), undefined);
      await withSql(url, async (sql) => {
        const rows = await sql`SELECT daemon_id FROM daemons`;
        assert.deepEqual(rows.length, 0);
      });
      // The live replica's writes land.
      await live.putSession(key("c1"), "fresh-session");
      await live.fleet!.syncDaemons([daemon]);
      assert.equal(
        (await lapsed.getSession(key("c1")))?.sessionId,
        "fresh-session",
      );
      assert.deepEqual(
        (await live.fleet!.listDaemons()).map((d) => d.replicaId),
        ["live"],
      );
    } finally {
      await live.close();
      await lapsed.close();
    }
  },
);
