/**
 * The run-store test suite every store implementation passes: the same
 * tests for the embedded SQLite file and for PostgreSQL, parameterised by
 * how a store is opened.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { RunEvent } from "../lib/events.ts";
import type { RunStore, SessionKey } from "../lib/store/types.ts";

/** How the suite reaches one kind of store. */
export interface StoreUnderTest {
  /** A name for test titles (`sqlite`, `postgres`). */
  name: string;
  /**
   * Makes a fresh, empty store location and returns an opener for it; every
   * store opened there shares its data. `options.holdEvents` keeps queued
   * events unwritten until a flush or a full queue.
   */
  fresh(): Promise<StoreLocation>;
}

/** One empty store location of a {@linkcode StoreUnderTest}. */
export interface StoreLocation {
  /** Opens a store on the location. */
  open(options?: { holdEvents?: boolean }): Promise<RunStore>;
  /**
   * Makes every write to the location fail (as on a full disk) while reads
   * go on; resolves to the function that lets writes through again.
   */
  refuseWrites(): Promise<() => Promise<void>>;
  /** Removes the location. */
  remove(): Promise<void>;
}

/** An event of `type` with `data`, as a run emits it. */
export function event(
  type: string,
  data: Record<string, unknown> = {},
): RunEvent {
  return { run_id: "", type, data };
}

/** A session key with every field set. */
export const KEY: SessionKey = {
  conversationId: "conv-1",
  provider: "codex",
  location: "daemon",
  target: "alice-laptop",
  workspace: "/home/alice/project",
  agentCommand: "npx -y @zed-industries/codex-acp",
};

/** The session key of a local run of the custom provider's `agent` in `workspace`. */
export function localSessionKey(
  conversationId: string,
  workspace = "/w",
): SessionKey {
  return {
    conversationId,
    provider: "custom",
    location: "local",
    target: "",
    workspace,
    agentCommand: "agent",
  };
}

/** Runs `body` on a fresh location, closing every store it opened. */
export async function withLocation(
  kind: StoreUnderTest,
  body: (
    open: (options?: { holdEvents?: boolean }) => Promise<RunStore>,
    location: StoreLocation,
  ) => Promise<void>,
): Promise<void> {
  const location = await kind.fresh();
  const stores: RunStore[] = [];
  try {
    await body(async (options) => {
      const store = await location.open(options);
      stores.push(store);
      return store;
    }, location);
  } finally {
    for (const store of stores) await store.close();
    await location.remove();
  }
}

/** Resolves once `check` holds, looking again after each store round trip. */
async function until(check: () => Promise<boolean>): Promise<void> {
  while (!await check()) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** Registers the shared store tests for `kind`. */
export function defineStoreSuite(kind: StoreUnderTest): void {
  const test = (name: string, body: () => Promise<void>) =>
    Deno.test({
      name: `[${kind.name}] ${name}`,
      sanitizeResources: false,
      sanitizeOps: false,
      fn: body,
    });

  test("a session is only found again with the full key", () =>
    withLocation(kind, async (open) => {
      const store = await open();
      assert.equal(await store.getSession(KEY), undefined);
      await store.putSession(KEY, "sess-1");
      assert.equal((await store.getSession(KEY))?.sessionId, "sess-1");
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
          await store.getSession({ ...KEY, ...changed }),
          undefined,
          JSON.stringify(changed),
        );
      }
      await store.putSession({ ...KEY, target: "bob-desktop" }, "sess-bob");
      await store.putSession(KEY, "sess-2");
      assert.equal((await store.getSession(KEY))?.sessionId, "sess-2");
      assert.equal(
        (await store.getSession({ ...KEY, target: "bob-desktop" }))?.sessionId,
        "sess-bob",
      );
      assert.deepEqual(
        (await store.listSessions("conv-1")).map((
          session,
        ) => [session.target, session.sessionId]).sort(),
        [["alice-laptop", "sess-2"], ["bob-desktop", "sess-bob"]],
      );
      assert.equal(await store.deleteSessions("conv-1"), 2);
      assert.equal(await store.getSession(KEY), undefined);
      assert.equal(await store.deleteSessions("conv-1"), 0);
    }));

  test("a session's running cost is kept with its session id, and counts for no other session under the key", () =>
    withLocation(kind, async (open) => {
      const store = await open();
      const cost = { amount: 0.75, currency: "USD" };
      // Nothing is kept without a stored session.
      await store.putSessionCost(KEY, { sessionId: "sess-1", cost });
      assert.equal(await store.getSession(KEY), undefined);
      await store.putSession(KEY, "sess-1");
      await store.putSessionCost(KEY, { sessionId: "sess-1", cost });
      assert.deepEqual((await store.getSession(KEY))?.cost, cost);
      await store.close();
      const again = await open();
      assert.deepEqual((await again.getSession(KEY))?.cost, cost);
      // A new session under the key starts without the old session's total.
      await again.putSession(KEY, "sess-2");
      assert.equal((await again.getSession(KEY))?.cost, undefined);
      await again.close();
    }));

  test("a session's remembered config values are kept with it, replaced, kept across a new session id and forgotten with it", () =>
    withLocation(kind, async (open) => {
      const store = await open();
      const settings = {
        model: "fast",
        mode: "plan",
        config: { effort: "low" },
      };
      // Nothing is remembered without a stored session.
      await store.putSessionSettings(KEY, settings);
      assert.equal(await store.getSession(KEY), undefined);
      await store.putSession(KEY, "sess-1");
      assert.equal((await store.getSession(KEY))?.settings, undefined);
      await store.putSessionSettings(KEY, settings);
      assert.deepEqual(await store.getSession(KEY), {
        sessionId: "sess-1",
        updatedAt: (await store.getSession(KEY))!.updatedAt,
        settings,
      });
      await store.putSession({ ...KEY, target: "bob-desktop" }, "sess-bob");
      assert.equal(
        (await store.getSession({ ...KEY, target: "bob-desktop" }))?.settings,
        undefined,
      );
      // A new session id for the key keeps what the conversation remembers.
      await store.putSession(KEY, "sess-2");
      assert.deepEqual((await store.getSession(KEY))?.settings, settings);
      await store.putSessionSettings(KEY, { model: "smart" });
      assert.deepEqual((await store.getSession(KEY))?.settings, {
        model: "smart",
      });
      assert.deepEqual(
        (await store.listSessions("conv-1")).map((session) => [
          session.sessionId,
          session.settings,
        ]).sort(),
        [["sess-2", { model: "smart" }], ["sess-bob", undefined]],
      );
      await store.deleteSessions("conv-1");
      await store.putSession(KEY, "sess-3");
      assert.equal((await store.getSession(KEY))?.settings, undefined);
      await store.close();
      const again = await open();
      await again.putSessionSettings(KEY, settings);
      await again.close();
      assert.deepEqual(
        (await (await open()).getSession(KEY))?.settings,
        settings,
      );
    }));

  test("events are batched, then stored in order with sequences", () =>
    withLocation(kind, async (open) => {
      const writer = await open({ holdEvents: true });
      const reader = await open();
      await writer.createRun({
        runId: "run-1",
        conversationId: "conv-1",
        config: {},
        status: "active",
      });
      const first = writer.appendEvent(
        "run-1",
        event("message.delta", { text: "a" }),
      );
      assert.deepEqual(
        [first.run_id, first.sequence, typeof first.timestamp],
        ["run-1", 1, "number"],
      );
      writer.appendEvent("run-1", event("message.delta", { text: "b" }));
      // Still queued: another connection cannot see them yet.
      assert.deepEqual(await reader.getEvents("run-1"), []);
      await writer.flush();
      assert.deepEqual(
        (await reader.getEvents("run-1")).map((e) => e.data.text),
        ["a", "b"],
      );

      for (let index = 0; index < 300; index++) {
        writer.appendEvent(
          "run-1",
          event("message.delta", { text: `${index}` }),
        );
      }
      // A full queue is written without waiting for a flush.
      await until(async () => (await reader.getEvents("run-1")).length >= 258);
      const all = await writer.getEvents("run-1");
      assert.equal(all.length, 302);
      assert.deepEqual(
        all.map((e) => e.sequence),
        Array.from({ length: 302 }, (_, i) => i + 1),
      );
      assert.equal(all.every((e) => e.run_id === "run-1"), true);

      const tail = await writer.getEvents("run-1", { after: 300 });
      assert.deepEqual(tail.map((e) => [e.sequence, e.data.text]), [
        [301, "298"],
        [302, "299"],
      ]);
      const page = await writer.getEvents("run-1", { after: 10, limit: 3 });
      assert.deepEqual(page.map((e) => e.sequence), [11, 12, 13]);
      assert.deepEqual(await writer.getEvents("run-1", { after: 302 }), []);
      assert.deepEqual(await writer.getEvents("no-such-run"), []);
    }));

  test("durable() resolves once the events queued before it are committed, with no flush asked", () =>
    withLocation(kind, async (open) => {
      const writer = await open();
      const reader = await open();
      await writer.createRun({ runId: "run-1", config: {}, status: "active" });
      await writer.durable(); // nothing queued
      writer.appendEvent("run-1", event("message.delta", { text: "a" }));
      writer.appendEvent("run-1", event("message.delta", { text: "b" }));
      const first = writer.durable();
      writer.appendEvent("run-1", event("message.delta", { text: "c" }));
      await first;
      assert.deepEqual(
        (await reader.getEvents("run-1")).slice(0, 2).map((e) => e.data.text),
        ["a", "b"],
      );
      await writer.durable();
      assert.deepEqual(
        (await reader.getEvents("run-1")).map((e) => e.data.text),
        ["a", "b", "c"],
      );
    }));

  test("given sequences are kept and a repeated sequence is ignored", () =>
    withLocation(kind, async (open) => {
      const store = await open();
      await store.createRun({ runId: "run-1", config: {}, status: "active" });
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
        (await store.getEvents("run-1")).map((
          e,
        ) => [e.sequence, e.type, e.data.text]),
        [[5, "message.delta", "x"], [6, "run.completed", undefined]],
      );
    }));

  test("runs are recorded, finished once and listed newest first", () =>
    withLocation(kind, async (open) => {
      const store = await open();
      for (
        const [runId, conversationId] of [
          ["r1", "c1"],
          ["r2", "c2"],
          ["r3", "c1"],
        ]
      ) {
        await store.createRun({
          runId,
          conversationId,
          config: { provider: "codex" },
          status: "active",
        });
      }
      await store.createRun({ runId: "r4", config: {}, status: "active" });
      store.appendEvent("r1", event("run.failed", { code: "run.timeout" }));
      assert.equal(
        await store.finishRun("r1", {
          status: "failed",
          code: "run.timeout",
          error: "too slow",
        }),
        true,
      );
      assert.deepEqual((await store.getEvents("r1")).map((e) => e.type), [
        "run.failed",
      ]);
      assert.equal(await store.finishRun("r1", { status: "completed" }), false);
      assert.equal(
        await store.finishRun("missing", { status: "completed" }),
        false,
      );
      assert.equal(await store.finishRun("r2", { status: "completed" }), true);

      const r1 = await store.getRun("r1");
      assert.deepEqual(
        [r1?.status, r1?.code, r1?.error, r1?.conversationId, r1?.config],
        ["failed", "run.timeout", "too slow", "c1", { provider: "codex" }],
      );
      assert.equal(typeof r1?.finishedAt, "number");
      const r4 = await store.getRun("r4");
      assert.deepEqual(
        [r4?.status, r4?.conversationId, r4?.code, r4?.finishedAt],
        ["active", undefined, undefined, undefined],
      );
      assert.equal(await store.getRun("missing"), undefined);

      const ids = async (runs: Promise<{ runId: string }[]>) =>
        (await runs).map((run) => run.runId);
      assert.deepEqual(await ids(store.listRuns({ limit: 10 })), [
        "r4",
        "r3",
        "r2",
        "r1",
      ]);
      assert.deepEqual(await ids(store.listRuns({ limit: 2 })), ["r4", "r3"]);
      assert.deepEqual(
        await ids(store.listRuns({ conversationId: "c1", limit: 10 })),
        ["r3", "r1"],
      );
      assert.deepEqual(
        await ids(store.listRuns({ status: "active", limit: 10 })),
        ["r4", "r3"],
      );
      assert.deepEqual(
        await ids(
          store.listRuns({ conversationId: "c1", status: "failed", limit: 10 }),
        ),
        ["r1"],
      );
    }));

  test("listing pages by keyset with before and filters by daemon-id", () =>
    withLocation(kind, async (open) => {
      const store = await open();
      for (let index = 0; index < 5; index++) {
        await store.createRun({
          runId: `p${index}`,
          config: index % 2 ? { "daemon-id": "laptop" } : {},
          ...(index === 4 ? { prompt: "List the files" } : {}),
          status: "active",
        });
      }
      assert.equal((await store.getRun("p4"))?.prompt, "List the files");
      assert.equal((await store.getRun("p3"))?.prompt, undefined);
      const ids = async (options: Parameters<RunStore["listRuns"]>[0]) =>
        (await store.listRuns(options)).map((run) => run.runId);
      assert.deepEqual(await ids({ limit: 2 }), ["p4", "p3"]);
      assert.deepEqual(await ids({ limit: 2, before: "p3" }), ["p2", "p1"]);
      assert.deepEqual(await ids({ limit: 2, before: "p1" }), ["p0"]);
      assert.deepEqual(await ids({ limit: 10, daemonId: "laptop" }), [
        "p3",
        "p1",
      ]);
      assert.deepEqual(
        await ids({ limit: 10, daemonId: "laptop", before: "p3" }),
        ["p1"],
      );
    }));

  test("imported runs are stored with their events, all or nothing, owned by nobody", () =>
    withLocation(kind, async (open) => {
      const store = await open();
      await store.createRun({ runId: "here", config: {}, status: "active" });
      const imported = (runId: string) => ({
        record: {
          runId,
          conversationId: "conv-moved",
          status: "completed" as const,
          config: { provider: "codex" },
          prompt: "Fix the bug",
          createdAt: 1_000,
          updatedAt: 2_000,
          finishedAt: 2_000,
          usage: { prompt_tokens: 7, cost: { amount: 0.5, currency: "EUR" } },
        },
        events: [
          { ...event("message.completed"), sequence: 1, timestamp: 1_500 },
          { ...event("run.completed"), sequence: 2, timestamp: 2_000 },
        ],
      });
      // One id is taken: nothing of the batch is written.
      assert.deepEqual(
        await store.importRuns([imported("moved-1"), imported("here")]),
        { kind: "runs", runIds: ["here"] },
      );
      assert.equal(await store.getRun("moved-1"), undefined);
      assert.equal(await store.importRuns([imported("moved-1")]), undefined);
      const record = await store.getRun("moved-1");
      assert.equal(record?.status, "completed");
      assert.equal(record?.conversationId, "conv-moved");
      assert.equal(record?.prompt, "Fix the bug");
      assert.equal(record?.createdAt, 1_000);
      assert.equal(record?.finishedAt, 2_000);
      assert.deepEqual(record?.usage, {
        prompt_tokens: 7,
        cost: { amount: 0.5, currency: "EUR" },
      });
      const events = await store.getEvents("moved-1");
      assert.deepEqual(events.map((e) => [e.run_id, e.type, e.sequence]), [
        ["moved-1", "message.completed", 1],
        ["moved-1", "run.completed", 2],
      ]);
      // No owner: the sweep of orphaned runs leaves an ended run alone.
      assert.deepEqual(
        await store.markActiveRunsFailed("runner.restarted", "gone"),
        [],
      );
      assert.equal((await store.getRun("moved-1"))?.status, "completed");
      await store.finishRun("here", { status: "completed" });
    }));

  test("imported runs never join a conversation that has runs or sessions here", () =>
    withLocation(kind, async (open) => {
      const store = await open();
      const imported = (runId: string, conversationId: string) => ({
        record: {
          runId,
          conversationId,
          status: "completed" as const,
          config: {},
          // Newer than anything: it would be the conversation's latest run.
          createdAt: Date.now() + 86_400_000,
          updatedAt: Date.now() + 86_400_000,
        },
        events: [],
      });
      await store.createRun({
        runId: "victim-1",
        conversationId: "victim",
        config: {},
        status: "active",
      });
      await store.putSession({ ...KEY, conversationId: "with-session" }, "s");
      for (const conversationId of ["victim", "with-session"]) {
        assert.deepEqual(
          await store.importRuns([imported("planted", conversationId)]),
          { kind: "conversation", conversationId },
        );
      }
      assert.equal(await store.getRun("planted"), undefined);
      assert.deepEqual(
        (await store.listRuns({ conversationId: "victim", limit: 5 }))
          .map((run) => run.runId),
        ["victim-1"],
      );
      // A conversation of its own: stored, and imported once.
      assert.equal(
        await store.importRuns([imported("moved", "moved-conv")]),
        undefined,
      );
      assert.deepEqual(
        await store.importRuns([imported("moved-2", "moved-conv")]),
        { kind: "conversation", conversationId: "moved-conv" },
      );
      await store.finishRun("victim-1", { status: "completed" });
    }));

  test("two stores on one location see each other's writes", () =>
    withLocation(kind, async (open) => {
      const serve = await open();
      const run = await open();
      await run.putSession(KEY, "sess-1");
      assert.equal((await serve.getSession(KEY))?.sessionId, "sess-1");
      await run.createRun({ runId: "r1", config: {}, status: "active" });
      run.appendEvent("r1", event("message.delta", { text: "hello" }));
      run.appendEvent("r1", event("run.completed"));
      await run.finishRun("r1", { status: "completed" });
      assert.equal((await serve.getRun("r1"))?.status, "completed");
      assert.deepEqual((await serve.getEvents("r1")).map((e) => e.type), [
        "message.delta",
        "run.completed",
      ]);
      await serve.putSession(KEY, "sess-2");
      assert.equal((await run.getSession(KEY))?.sessionId, "sess-2");
      assert.equal(await serve.deleteSessions(KEY.conversationId), 1);
      assert.deepEqual(await run.listSessions(KEY.conversationId), []);
    }));

  test("reopening the store keeps sessions, runs and events", () =>
    withLocation(kind, async (open) => {
      const first = await open();
      await first.putSession(KEY, "sess-1");
      await first.createRun({
        runId: "r1",
        config: { workspace: "/w" },
        status: "active",
      });
      first.appendEvent(
        "r1",
        event("message.delta", { text: "queued at close" }),
      );
      await first.close();
      await first.close();
      const second = await open();
      assert.equal((await second.getSession(KEY))?.sessionId, "sess-1");
      assert.deepEqual((await second.getRun("r1"))?.config, {
        workspace: "/w",
      });
      assert.deepEqual(
        (await second.getEvents("r1")).map((e) => e.data.text),
        ["queued at close"],
      );
      assert.equal(
        second.appendEvent("r1", event("run.completed")).sequence,
        2,
      );
    }));

  test("an ended store refuses further use with runner.internal", () =>
    withLocation(kind, async (open) => {
      const store = await open();
      await store.close();
      await assert.rejects(() => store.getRun("r1"), {
        code: "runner.internal",
      });
    }));

  defineRetentionTests(test, kind);
}

/** Creates runs `r0`… of one conversation, each with two events; `active` ones stay unfinished. */
async function seedRuns(
  store: RunStore,
  count: number,
  active: string[] = [],
): Promise<void> {
  for (let index = 0; index < count; index++) {
    const runId = `r${index}`;
    await store.createRun({
      runId,
      conversationId: KEY.conversationId,
      config: {},
      status: "active",
    });
    store.appendEvent(runId, event("message.delta", { text: runId }));
    if (active.includes(runId)) continue;
    store.appendEvent(runId, event("run.completed"));
    await store.finishRun(runId, { status: "completed" });
  }
  await store.flush();
}

/** The ids `listRuns` shows, newest first. */
async function listedIds(store: RunStore): Promise<string[]> {
  return (await store.listRuns({ limit: 1000 })).map((run) => run.runId);
}

/** The retention and fault-state tests of the shared suite. */
function defineRetentionTests(
  test: (name: string, body: () => Promise<void>) => void,
  kind: StoreUnderTest,
): void {
  test("pruning keeps the newest runs, deletes the older finished ones with their events in batches, and never an active run or a session", () =>
    withLocation(kind, async (open) => {
      const store = await open();
      await store.putSession(KEY, "sess-1");
      // Created within the same milliseconds: ties go by creation order.
      await seedRuns(store, 10, ["r2"]);
      const batches = [];
      for (;;) {
        const batch = await store.pruneRuns({ keepNewest: 4, limit: 3 });
        batches.push(batch);
        if (batch.runs < 3) break;
      }
      assert.deepEqual(batches, [
        { runs: 3, events: 6 },
        { runs: 2, events: 4 },
      ]);
      assert.deepEqual(await listedIds(store), ["r9", "r8", "r7", "r6", "r2"]);
      for (const gone of ["r0", "r1", "r3", "r4", "r5"]) {
        assert.equal(await store.getRun(gone), undefined, gone);
        assert.deepEqual(await store.getEvents(gone), [], gone);
      }
      assert.deepEqual(
        (await store.getEvents("r2")).map((e) => e.data.text),
        ["r2"],
      );
      assert.equal((await store.getSession(KEY))?.sessionId, "sess-1");
      assert.deepEqual(await store.pruneRuns({ keepNewest: 4, limit: 3 }), {
        runs: 0,
        events: 0,
      });
      // The active run ends: now it is the oldest finished run past the newest 4.
      store.appendEvent("r2", event("run.completed"));
      await store.finishRun("r2", { status: "completed" });
      assert.deepEqual(await store.pruneRuns({ keepNewest: 4, limit: 3 }), {
        runs: 1,
        events: 2,
      });
      assert.deepEqual(await listedIds(store), ["r9", "r8", "r7", "r6"]);
    }));

  test("pruning by age deletes finished runs created before the cutoff; the later of both bounds wins; nothing set deletes nothing", () =>
    withLocation(kind, async (open) => {
      const store = await open();
      await seedRuns(store, 4, ["r1"]);
      assert.deepEqual(await store.pruneRuns({ limit: 10 }), {
        runs: 0,
        events: 0,
      });
      const before = (await store.getRun("r0"))!.createdAt;
      assert.deepEqual(
        await store.pruneRuns({ createdBefore: before, limit: 10 }),
        { runs: 0, events: 0 },
      );
      // The age bound keeps everything; the count bound goes further.
      assert.deepEqual(
        await store.pruneRuns({
          createdBefore: before,
          keepNewest: 3,
          limit: 10,
        }),
        { runs: 1, events: 2 },
      );
      assert.deepEqual(
        await store.pruneRuns({
          createdBefore: Date.now() + 1,
          keepNewest: 3,
          limit: 10,
        }),
        { runs: 2, events: 4 },
      );
      assert.deepEqual(await listedIds(store), ["r1"]);
    }));

  test("a run whose outcome could not be stored reads as ended until the retried write lands", () =>
    withLocation(kind, async (open, location) => {
      const store = await open();
      await seedRuns(store, 1, ["r0"]);
      const allow = await location.refuseWrites();
      try {
        store.appendEvent("r0", event("run.completed"));
        await assert.rejects(
          () => store.finishRun("r0", { status: "completed" }),
          { code: "store.unavailable" },
        );
        const run = await store.getRun("r0");
        assert.equal(run?.status, "completed");
        assert.equal(typeof run?.finishedAt, "number");
        assert.deepEqual(
          (await store.listRuns({ limit: 10 })).map((r) => r.status),
          ["completed"],
        );
        assert.deepEqual(
          await store.listRuns({ status: "active", limit: 10 }),
          [],
        );
        // Stored as active, so never pruned meanwhile.
        assert.deepEqual(
          await store.pruneRuns({ createdBefore: Date.now() + 1, limit: 10 }),
          { runs: 0, events: 0 },
        );
      } finally {
        await allow();
      }
      assert.equal(await store.finishRun("r0", { status: "completed" }), true);
      const reader = await open();
      assert.equal((await reader.getRun("r0"))?.status, "completed");
      assert.deepEqual(
        (await reader.getEvents("r0")).map((e) => e.type),
        ["message.delta", "run.completed"],
      );
    }));

  test("a run's usage is stored with its end, read back by getRun and listRuns, and absent when none was reported", () =>
    withLocation(kind, async (open) => {
      const store = await open();
      const usage = {
        prompt_tokens: 100,
        completion_tokens: 20,
        total_tokens: 162,
        cached_read_tokens: 30,
        used: 1000,
        size: 200000,
        cost: { amount: 0.25, currency: "USD" },
      };
      for (const runId of ["counted", "silent"]) {
        await store.createRun({
          runId,
          conversationId: "conv-usage",
          config: {},
          status: "active",
        });
      }
      assert.equal(
        await store.finishRun("counted", {
          status: "failed",
          code: "run.timeout",
          usage,
        }),
        true,
      );
      assert.equal(
        await store.finishRun("silent", { status: "completed" }),
        true,
      );
      const reader = await open();
      assert.deepEqual((await reader.getRun("counted"))?.usage, usage);
      assert.equal("usage" in (await reader.getRun("silent"))!, false);
      assert.deepEqual(
        (await reader.listRuns({ conversationId: "conv-usage", limit: 10 }))
          .map((run) => [run.runId, run.usage]).sort(),
        [["counted", usage], ["silent", undefined]],
      );
    }));
}
