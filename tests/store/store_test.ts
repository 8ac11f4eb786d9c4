import assert from "node:assert/strict";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { RunnerError } from "../../lib/errors.ts";
import type { RunEvent } from "../../lib/events.ts";
import type { RunStore } from "../../lib/store/types.ts";
import { defineStoreSuite, localSessionKey } from "../store_suite.ts";
import {
  defaultDataDir,
  openStore,
  STORE_FILE_NAME,
} from "../../lib/store/open.ts";
import { SCHEMA_VERSION } from "../../lib/store/sqlite/schema.ts";
import { tempDir } from "../helpers.ts";

defineStoreSuite({
  name: "sqlite",
  fresh() {
    const dataDir = tempDir("runner-store-test-");
    return Promise.resolve({
      // Writes give up soon while the suite holds the lock (refuseWrites).
      open: () => openStore({ dataDir, busyTimeoutMs: 100 }),
      refuseWrites() {
        // Another process holding the write lock: every write fails, reads go on.
        const lock = new DatabaseSync(join(dataDir, STORE_FILE_NAME));
        lock.exec("BEGIN EXCLUSIVE");
        return Promise.resolve(() => {
          lock.exec("COMMIT");
          lock.close();
          return Promise.resolve();
        });
      },
      remove: () => Deno.remove(dataDir, { recursive: true }),
    });
  },
});

/** Runs `body` with a fresh data directory, closing every store it opened. */
async function withDataDir(
  body: (dataDir: string, open: () => Promise<RunStore>) => Promise<void>,
): Promise<void> {
  const dataDir = tempDir("runner-store-test-");
  const stores: RunStore[] = [];
  try {
    await body(dataDir, async () => {
      const store = await openStore({ dataDir });
      stores.push(store);
      return store;
    });
  } finally {
    for (const store of stores) await store.close();
    await Deno.remove(dataDir, { recursive: true });
  }
}

/** A delta event carrying `text`. */
function delta(text: string): RunEvent {
  return { run_id: "", type: "message.delta", data: { text } };
}

const STORE_MODULE = new URL("../../lib/store/open.ts", import.meta.url).href;

/** Code for a separate runner process that opens the store and starts a run it never finishes. */
function childScript(dataDir: string, runId: string, then: string): string {
  return `
    import { openStore } from ${JSON.stringify(STORE_MODULE)};
    const store = await openStore({ dataDir: ${JSON.stringify(dataDir)} });
    await store.createRun({ runId: ${
    JSON.stringify(runId)
  }, config: {}, status: "active" });
    store.appendEvent(${
    JSON.stringify(runId)
  }, { run_id: "", type: "message.delta", data: { text: "hi" } });
    await store.flush();
    console.log("started");
    ${then}
  `;
}

Deno.test("a new or empty store file is migrated to the current schema", async () => {
  await withDataDir(async (dataDir, open) => {
    await Deno.writeFile(join(dataDir, STORE_FILE_NAME), new Uint8Array());
    await (await open()).close();
    await (await open()).close(); // Reopening an up-to-date file is a no-op.
    const db = new DatabaseSync(join(dataDir, STORE_FILE_NAME));
    try {
      const version = db.prepare("PRAGMA user_version").get() as {
        user_version: number;
      };
      assert.equal(version.user_version, SCHEMA_VERSION);
      const mode = db.prepare("PRAGMA journal_mode").get() as {
        journal_mode: string;
      };
      assert.equal(mode.journal_mode, "wal");
      // Pruned runs' pages go back to the file system (incremental vacuum).
      const vacuum = db.prepare("PRAGMA auto_vacuum").get() as {
        auto_vacuum: number;
      };
      assert.equal(vacuum.auto_vacuum, 2);
      const tables = db.prepare(
        "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name",
      )
        .all().map((row) => row.name);
      assert.deepEqual(tables, ["events", "runs", "sessions"]);
    } finally {
      db.close();
    }
  });
});

Deno.test("a store file from before remembered session values is migrated in place: its sessions are kept and can remember values", async () => {
  await withDataDir(async (dataDir, open) => {
    const key = localSessionKey("c1");
    const first = await open();
    await first.putSession(key, "sess-old");
    await first.close();
    // Back to the schema before the settings column (and the usage and the
    // session cost after it).
    const db = new DatabaseSync(join(dataDir, STORE_FILE_NAME));
    db.exec("ALTER TABLE sessions DROP COLUMN cost_json");
    db.exec("ALTER TABLE runs DROP COLUMN usage_json");
    db.exec("ALTER TABLE sessions DROP COLUMN settings_json");
    db.exec(`PRAGMA user_version = ${SCHEMA_VERSION - 3}`);
    db.close();
    const store = await open();
    const stored = await store.getSession(key);
    assert.equal(stored?.sessionId, "sess-old");
    assert.equal(stored?.settings, undefined);
    await store.putSessionSettings(key, { mode: "plan" });
    assert.deepEqual((await store.getSession(key))?.settings, { mode: "plan" });
  });
});

Deno.test("a store written by a newer runner is refused", async () => {
  await withDataDir(async (dataDir) => {
    const db = new DatabaseSync(join(dataDir, STORE_FILE_NAME));
    db.exec(`PRAGMA user_version = ${SCHEMA_VERSION + 1}`);
    db.close();
    await assert.rejects(() => openStore({ dataDir }), (error) => {
      assert.ok(error instanceof RunnerError);
      assert.equal(error.code, "store.schema_too_new");
      return true;
    });
  });
});

Deno.test("an unusable data directory fails with store.unavailable", async () => {
  await withDataDir(async (dataDir) => {
    const notADirectory = join(dataDir, "file");
    await Deno.writeTextFile(notADirectory, "x");
    await assert.rejects(
      () => openStore({ dataDir: notADirectory }),
      (error) => {
        assert.ok(error instanceof RunnerError);
        assert.equal(error.code, "store.unavailable");
        assert.equal(error.retryable, true);
        return true;
      },
    );
  });
});

Deno.test("markActiveRunsFailed ends runs of a crashed process only", async () => {
  await withDataDir(async (dataDir, open) => {
    // A runner process that dies mid-run.
    const crashed = await new Deno.Command(Deno.execPath(), {
      args: ["eval", childScript(dataDir, "crashed-run", "Deno.exit(0);")],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(new TextDecoder().decode(crashed.stdout).trim(), "started");

    // A runner process that is still running its run.
    const alive = new Deno.Command(Deno.execPath(), {
      args: [
        "eval",
        // Holds its run until the test closes its stdin.
        childScript(
          dataDir,
          "live-run",
          "await new Response(Deno.stdin.readable).arrayBuffer();",
        ),
      ],
      stdin: "piped",
      stdout: "piped",
      stderr: "null",
    }).spawn();
    const lines = alive.stdout.pipeThrough(new TextDecoderStream()).getReader();
    assert.equal((await lines.read()).value?.trim(), "started");

    const store = await open();
    await store.createRun({ runId: "own-run", config: {}, status: "active" });
    const closedEarlier = await open();
    await closedEarlier.createRun({
      runId: "closed-run",
      config: {},
      status: "active",
    });
    await closedEarlier.close();

    const failed = await store.markActiveRunsFailed(
      "runner.restarted",
      "The runner restarted.",
    );
    assert.deepEqual(failed.sort(), ["closed-run", "crashed-run"]);
    const run = await store.getRun("crashed-run");
    assert.deepEqual([run?.status, run?.code, run?.error], [
      "failed",
      "runner.restarted",
      "The runner restarted.",
    ]);
    const events = await store.getEvents("crashed-run");
    assert.deepEqual(events.map((e) => [e.sequence, e.type]), [
      [1, "message.delta"],
      [
        2,
        "run.failed",
      ],
    ]);
    assert.deepEqual(events[1].data, {
      error: "The runner restarted.",
      code: "runner.restarted",
      retryable: true,
    });
    assert.equal((await store.getRun("live-run"))?.status, "active");
    assert.equal((await store.getRun("own-run"))?.status, "active");
    assert.deepEqual(
      await store.markActiveRunsFailed("runner.restarted", "again"),
      [],
    );

    await alive.stdin.close();
    await lines.cancel();
    assert.equal((await alive.status).success, true);
    assert.deepEqual(
      await store.markActiveRunsFailed("runner.restarted", "gone"),
      [
        "live-run",
      ],
    );
  });
});

Deno.test("events a process was told are durable survive its kill -9", async () => {
  await withDataDir(async (dataDir, open) => {
    const child = new Deno.Command(Deno.execPath(), {
      args: [
        "eval",
        `import { openStore } from ${JSON.stringify(STORE_MODULE)};
        const store = await openStore({ dataDir: ${JSON.stringify(dataDir)} });
        await store.createRun({ runId: "r1", config: {}, status: "active" });
        for (let i = 1; i <= 50; i++) {
          store.appendEvent("r1", { run_id: "", type: "message.delta", data: { text: String(i) } });
          if (i % 10 === 0) {
            await store.durable();
            console.log(i);
          }
        }
        await new Response(Deno.stdin.readable).arrayBuffer();`,
      ],
      stdin: "piped",
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
    let output = "";
    while (!output.includes("50\n")) output += (await lines.read()).value ?? "";
    child.kill("SIGKILL");
    await child.status;
    await lines.cancel();
    await child.stdin.close().catch(() => {});
    const store = await open();
    assert.deepEqual(
      (await store.getEvents("r1")).map((e) => e.data.text),
      Array.from({ length: 50 }, (_, i) => String(i + 1)),
    );
  });
});

Deno.test("while another process holds the write lock, durable() waits and reads show only committed events", async () => {
  await withDataDir(async (dataDir) => {
    const store = await openStore({
      dataDir,
      busyTimeoutMs: 20,
      onFlushError: () => {},
    });
    const lock = new DatabaseSync(join(dataDir, STORE_FILE_NAME));
    try {
      await store.createRun({ runId: "r1", config: {}, status: "active" });
      store.appendEvent("r1", delta("stored"));
      await store.durable();
      lock.exec("BEGIN EXCLUSIVE");
      store.appendEvent("r1", delta("queued"));
      let committed = false;
      const durable = store.durable().then(() => committed = true);
      await assert.rejects(() => store.flush(), { code: "store.unavailable" });
      assert.equal(committed, false);
      assert.deepEqual(
        (await store.getEvents("r1")).map((e) => e.data.text),
        ["stored"],
      );
      lock.exec("COMMIT");
      // The background retry writes it; then it is durable.
      await durable;
      assert.deepEqual(
        (await store.getEvents("r1")).map((e) => e.data.text),
        ["stored", "queued"],
      );
    } finally {
      if (lock.isTransaction) lock.exec("COMMIT");
      lock.close();
      await store.close();
    }
  });
});

Deno.test("defaultDataDir follows RUNNER_DATA_DIR, XDG_DATA_HOME, then the OS default", () => {
  const envOf = (values: Record<string, string>) => (name: string) =>
    values[name];
  assert.equal(
    defaultDataDir({
      env: envOf({
        RUNNER_DATA_DIR: "/data/r",
        XDG_DATA_HOME: "/x",
        HOME: "/h",
      }),
    }),
    "/data/r",
  );
  assert.equal(
    defaultDataDir({
      env: envOf({ XDG_DATA_HOME: "/x", HOME: "/h" }),
      os: "linux",
    }),
    "/x/runner",
  );
  assert.equal(
    defaultDataDir({
      env: envOf({ RUNNER_DATA_DIR: " ", HOME: "/h" }),
      os: "linux",
    }),
    "/h/.local/share/runner",
  );
  assert.equal(
    defaultDataDir({ env: envOf({ HOME: "/Users/a" }), os: "darwin" }),
    "/Users/a/Library/Application Support/runner",
  );
  assert.throws(
    () => defaultDataDir({ env: envOf({}), os: "linux" }),
    (error) => {
      assert.ok(error instanceof RunnerError);
      assert.equal(error.code, "config.invalid");
      return true;
    },
  );
});
