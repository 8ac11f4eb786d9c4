import assert from "node:assert/strict";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { RunnerError } from "../lib/errors.ts";
import type { RunEvent } from "../lib/events.ts";
import { type RunStore, type SessionKey } from "../lib/store/types.ts";
import {
  defaultDataDir,
  openStore,
  STORE_FILE_NAME,
} from "../lib/store/open.ts";
import { SCHEMA_VERSION } from "../lib/store/schema.ts";
import { tempDir } from "./helpers.ts";

/** Runs `body` with a fresh data directory, closing every store it opened. */
async function withDataDir(
  body: (dataDir: string, open: () => RunStore) => void | Promise<void>,
): Promise<void> {
  const dataDir = tempDir("runner-store-test-");
  const stores: RunStore[] = [];
  try {
    await body(dataDir, () => {
      const store = openStore({ dataDir });
      stores.push(store);
      return store;
    });
  } finally {
    for (const store of stores) store.close();
    await Deno.remove(dataDir, { recursive: true });
  }
}

const STORE_MODULE = new URL("../lib/store/open.ts", import.meta.url).href;

/** Code for a separate runner process that opens the store and starts a run it never finishes. */
function childScript(dataDir: string, runId: string, then: string): string {
  return `
    import { openStore } from ${JSON.stringify(STORE_MODULE)};
    const store = openStore({ dataDir: ${JSON.stringify(dataDir)} });
    store.createRun({ runId: ${
    JSON.stringify(runId)
  }, config: {}, status: "active" });
    store.appendEvent(${
    JSON.stringify(runId)
  }, { run_id: "", type: "message.delta", data: { text: "hi" } });
    store.flush();
    console.log("started");
    ${then}
  `;
}

function event(type: string, data: Record<string, unknown> = {}): RunEvent {
  return { run_id: "", type, data };
}

const KEY: SessionKey = {
  conversationId: "conv-1",
  provider: "codex",
  location: "daemon",
  target: "alice-laptop",
  workspace: "/home/alice/project",
  agentCommand: "npx -y @zed-industries/codex-acp",
};

Deno.test("a new or empty store file is migrated to the current schema", async () => {
  await withDataDir(async (dataDir, open) => {
    await Deno.writeFile(join(dataDir, STORE_FILE_NAME), new Uint8Array());
    open().close();
    open().close(); // Reopening an up-to-date file is a no-op.
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

Deno.test("a store written by a newer runner is refused", async () => {
  await withDataDir((dataDir) => {
    const db = new DatabaseSync(join(dataDir, STORE_FILE_NAME));
    db.exec(`PRAGMA user_version = ${SCHEMA_VERSION + 1}`);
    db.close();
    assert.throws(() => openStore({ dataDir }), (error) => {
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
    assert.throws(() => openStore({ dataDir: notADirectory }), (error) => {
      assert.ok(error instanceof RunnerError);
      assert.equal(error.code, "store.unavailable");
      assert.equal(error.retryable, true);
      return true;
    });
  });
});

Deno.test("a session is only found again with the full key", async () => {
  await withDataDir((_dataDir, open) => {
    const store = open();
    assert.equal(store.getSession(KEY), undefined);
    store.putSession(KEY, "sess-1");
    assert.equal(store.getSession(KEY)?.sessionId, "sess-1");
    for (
      const changed of [
        { conversationId: "conv-2" },
        { provider: "claude-code" },
        { location: "local" },
        { target: "bob-desktop" },
        { workspace: "/home/alice/other" },
        { agentCommand: "/opt/codex-acp" },
      ]
    ) {
      assert.equal(
        store.getSession({ ...KEY, ...changed }),
        undefined,
        JSON.stringify(changed),
      );
    }
    store.putSession({ ...KEY, target: "bob-desktop" }, "sess-bob");
    store.putSession(KEY, "sess-2");
    assert.equal(store.getSession(KEY)?.sessionId, "sess-2");
    assert.equal(
      store.getSession({ ...KEY, target: "bob-desktop" })?.sessionId,
      "sess-bob",
    );
    assert.deepEqual(
      store.listSessions("conv-1").map((
        session,
      ) => [session.target, session.sessionId]).sort(),
      [["alice-laptop", "sess-2"], ["bob-desktop", "sess-bob"]],
    );
    assert.equal(store.deleteSessions("conv-1"), 2);
    assert.equal(store.getSession(KEY), undefined);
    assert.equal(store.deleteSessions("conv-1"), 0);
  });
});

Deno.test("events are batched, then stored in order with sequences", async () => {
  await withDataDir((_dataDir, open) => {
    const writer = open();
    const reader = open();
    writer.createRun({
      runId: "run-1",
      conversationId: "conv-1",
      config: {},
      status: "active",
    });
    const first = writer.appendEvent(
      "run-1",
      event("message.delta", { text: "a" }),
    );
    assert.deepEqual([first.run_id, first.sequence, typeof first.timestamp], [
      "run-1",
      1,
      "number",
    ]);
    writer.appendEvent("run-1", event("message.delta", { text: "b" }));
    // Still queued: another connection cannot see them yet.
    assert.deepEqual(reader.getEvents("run-1"), []);
    writer.flush();
    assert.deepEqual(reader.getEvents("run-1").map((e) => e.data.text), [
      "a",
      "b",
    ]);

    for (let index = 0; index < 300; index++) {
      writer.appendEvent("run-1", event("message.delta", { text: `${index}` }));
    }
    // A large queue is written without waiting for the timer.
    assert.equal(reader.getEvents("run-1").length >= 258, true);
    const all = writer.getEvents("run-1");
    assert.equal(all.length, 302);
    assert.deepEqual(
      all.map((e) => e.sequence),
      Array.from({ length: 302 }, (_, i) => i + 1),
    );
    assert.equal(all.every((e) => e.run_id === "run-1"), true);

    const tail = writer.getEvents("run-1", { after: 300 });
    assert.deepEqual(tail.map((e) => [e.sequence, e.data.text]), [
      [301, "298"],
      [
        302,
        "299",
      ],
    ]);
    assert.deepEqual(writer.getEvents("run-1", { after: 302 }), []);
    assert.deepEqual(writer.getEvents("no-such-run"), []);
  });
});

Deno.test("given sequences are kept and a repeated sequence is ignored", async () => {
  await withDataDir((_dataDir, open) => {
    const store = open();
    store.createRun({ runId: "run-1", config: {}, status: "active" });
    store.appendEvent("run-1", {
      ...event("message.delta", { text: "x" }),
      sequence: 5,
    });
    store.appendEvent("run-1", {
      ...event("message.delta", { text: "dup" }),
      sequence: 5,
    });
    const next = store.appendEvent("run-1", event("run.completed"));
    assert.equal(next.sequence, 6);
    assert.deepEqual(
      store.getEvents("run-1").map((e) => [e.sequence, e.type, e.data.text]),
      [[5, "message.delta", "x"], [6, "run.completed", undefined]],
    );
  });
});

Deno.test("runs are recorded, finished once and listed newest first", async () => {
  await withDataDir((_dataDir, open) => {
    const store = open();
    for (
      const [runId, conversationId] of [["r1", "c1"], ["r2", "c2"], [
        "r3",
        "c1",
      ]]
    ) {
      store.createRun({
        runId,
        conversationId,
        config: { provider: "codex" },
        status: "active",
      });
    }
    store.createRun({ runId: "r4", config: {}, status: "active" });
    store.appendEvent("r1", event("run.failed", { code: "run.timeout" }));
    assert.equal(
      store.finishRun("r1", {
        status: "failed",
        code: "run.timeout",
        error: "too slow",
      }),
      true,
    );
    assert.deepEqual(store.getEvents("r1").map((e) => e.type), ["run.failed"]);
    assert.equal(store.finishRun("r1", { status: "completed" }), false);
    assert.equal(store.finishRun("missing", { status: "completed" }), false);
    assert.equal(store.finishRun("r2", { status: "completed" }), true);

    const r1 = store.getRun("r1");
    assert.deepEqual(
      [r1?.status, r1?.code, r1?.error, r1?.conversationId, r1?.config],
      ["failed", "run.timeout", "too slow", "c1", { provider: "codex" }],
    );
    assert.equal(typeof r1?.finishedAt, "number");
    const r4 = store.getRun("r4");
    assert.deepEqual(
      [r4?.status, r4?.conversationId, r4?.code, r4?.finishedAt],
      [
        "active",
        undefined,
        undefined,
        undefined,
      ],
    );
    assert.equal(store.getRun("missing"), undefined);

    const ids = (runs: { runId: string }[]) => runs.map((run) => run.runId);
    assert.deepEqual(ids(store.listRuns({ limit: 10 })), [
      "r4",
      "r3",
      "r2",
      "r1",
    ]);
    assert.deepEqual(ids(store.listRuns({ limit: 2 })), ["r4", "r3"]);
    assert.deepEqual(ids(store.listRuns({ conversationId: "c1", limit: 10 })), [
      "r3",
      "r1",
    ]);
    assert.deepEqual(ids(store.listRuns({ status: "active", limit: 10 })), [
      "r4",
      "r3",
    ]);
    assert.deepEqual(
      ids(
        store.listRuns({ conversationId: "c1", status: "failed", limit: 10 }),
      ),
      [
        "r1",
      ],
    );
  });
});

Deno.test("two stores on one file see each other's writes", async () => {
  await withDataDir((_dataDir, open) => {
    const serve = open();
    const run = open();
    run.putSession(KEY, "sess-1");
    assert.equal(serve.getSession(KEY)?.sessionId, "sess-1");
    run.createRun({ runId: "r1", config: {}, status: "active" });
    run.appendEvent("r1", event("message.delta", { text: "hello" }));
    run.appendEvent("r1", event("run.completed"));
    run.finishRun("r1", { status: "completed" });
    assert.equal(serve.getRun("r1")?.status, "completed");
    assert.deepEqual(serve.getEvents("r1").map((e) => e.type), [
      "message.delta",
      "run.completed",
    ]);
    serve.putSession(KEY, "sess-2");
    assert.equal(run.getSession(KEY)?.sessionId, "sess-2");
    assert.equal(serve.deleteSessions(KEY.conversationId), 1);
    assert.deepEqual(run.listSessions(KEY.conversationId), []);
  });
});

Deno.test("reopening the store keeps sessions, runs and events", async () => {
  await withDataDir((dataDir) => {
    const first = openStore({ dataDir });
    first.putSession(KEY, "sess-1");
    first.createRun({
      runId: "r1",
      config: { workspace: "/w" },
      status: "active",
    });
    first.appendEvent(
      "r1",
      event("message.delta", { text: "queued at close" }),
    );
    first.close();
    first.close();
    const second = openStore({ dataDir });
    try {
      assert.equal(second.getSession(KEY)?.sessionId, "sess-1");
      assert.deepEqual(second.getRun("r1")?.config, { workspace: "/w" });
      assert.deepEqual(second.getEvents("r1").map((e) => e.data.text), [
        "queued at close",
      ]);
      assert.equal(
        second.appendEvent("r1", event("run.completed")).sequence,
        2,
      );
    } finally {
      second.close();
    }
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
        childScript(dataDir, "live-run", "await Deno.stdin.readable.cancel();"),
      ],
      stdin: "piped",
      stdout: "piped",
      stderr: "null",
    }).spawn();
    const lines = alive.stdout.pipeThrough(new TextDecoderStream()).getReader();
    assert.equal((await lines.read()).value?.trim(), "started");

    const store = open();
    store.createRun({ runId: "own-run", config: {}, status: "active" });
    const closedEarlier = open();
    closedEarlier.createRun({
      runId: "closed-run",
      config: {},
      status: "active",
    });
    closedEarlier.close();

    const failed = store.markActiveRunsFailed(
      "runner.restarted",
      "The runner restarted.",
    );
    assert.deepEqual(failed.sort(), ["closed-run", "crashed-run"]);
    const run = store.getRun("crashed-run");
    assert.deepEqual([run?.status, run?.code, run?.error], [
      "failed",
      "runner.restarted",
      "The runner restarted.",
    ]);
    const events = store.getEvents("crashed-run");
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
    assert.equal(store.getRun("live-run")?.status, "active");
    assert.equal(store.getRun("own-run")?.status, "active");
    assert.deepEqual(
      store.markActiveRunsFailed("runner.restarted", "again"),
      [],
    );

    await alive.stdin.close();
    await lines.cancel();
    assert.equal((await alive.status).success, true);
    assert.deepEqual(store.markActiveRunsFailed("runner.restarted", "gone"), [
      "live-run",
    ]);
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
