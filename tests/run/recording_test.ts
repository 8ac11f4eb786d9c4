/**
 * The recorder's write order for a conversation's session: the remembered
 * session config values land on the session row its id made, also when the
 * two events come back to back (a daemon's events arrive from the wire in
 * one read), so the next run of the conversation gets them back.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { createRunRecorder } from "../../lib/run/recording.ts";
import { SESSION_SETTINGS_KEY } from "../../lib/run/session_memory.ts";
import { openStore } from "../../lib/store/open.ts";
import type { RunEvent } from "../../lib/events.ts";
import type { SessionKey } from "../../lib/store/types.ts";
import { tempDir } from "../helpers.ts";

const KEY: SessionKey = {
  conversationId: "conv-order",
  provider: "custom",
  location: "local",
  target: "",
  workspace: "/srv/ws",
  agentCommand: "agent --acp",
};

Deno.test("a session id and its remembered values emitted back to back are both stored, the values on the id's row", async () => {
  const store = await openStore({ dataDir: tempDir() });
  try {
    const runId = "run-order-1";
    await store.createRun({
      runId,
      conversationId: KEY.conversationId,
      config: {},
      status: "active",
    });
    const recorder = createRunRecorder({
      store,
      runId,
      sessionKey: KEY,
      secrets: [],
      log: () => {},
    });
    const event = (sequence: number, key: string, value: unknown) => ({
      run_id: runId,
      type: "state.updated",
      sequence,
      timestamp: Date.now(),
      data: { key, value },
    });
    recorder.emit(event(1, "external.acp_session_id", "session-abc"));
    recorder.emit(
      event(2, SESSION_SETTINGS_KEY, { model: "fast", mode: "plan" }),
    );
    await recorder.settled();
    const sessions = await store.listSessions(KEY.conversationId);
    assert.equal(sessions.length, 1);
    assert.equal(sessions[0].sessionId, "session-abc");
    assert.deepEqual(sessions[0].settings, { model: "fast", mode: "plan" });
  } finally {
    await store.close();
  }
});

/** A store with one active run, and a recorder of it whose log is kept. */
async function recorded(
  options: {
    runId?: string;
    secrets?: string[];
    sessionCost?: {
      sessionId: string;
      cost?: { amount: number; currency: string };
    };
    busyTimeoutMs?: number;
    dataDir?: string;
  } = {},
) {
  const dataDir = options.dataDir ?? tempDir();
  const store = await openStore({
    dataDir,
    ...(options.busyTimeoutMs ? { busyTimeoutMs: options.busyTimeoutMs } : {}),
  });
  const runId = options.runId ?? "run-1";
  await store.createRun({
    runId,
    conversationId: KEY.conversationId,
    config: {},
    status: "active",
  });
  const logs: Record<string, unknown>[] = [];
  const logged = new Set<(entry: Record<string, unknown>) => void>();
  const recorder = createRunRecorder({
    store,
    runId,
    sessionKey: KEY,
    secrets: options.secrets ?? [],
    ...(options.sessionCost ? { sessionCost: options.sessionCost } : {}),
    log: (entry) => {
      logs.push(entry);
      for (const watcher of logged) watcher(entry);
    },
    finishRetryMs: 20,
  });
  /** Resolves with the first log entry (so far or later) `match` accepts. */
  const waitForLog = (match: (entry: Record<string, unknown>) => boolean) => {
    const seen = logs.find(match);
    if (seen) return Promise.resolve(seen);
    return new Promise<Record<string, unknown>>((resolve) => {
      const watcher = (entry: Record<string, unknown>) => {
        if (!match(entry)) return;
        logged.delete(watcher);
        resolve(entry);
      };
      logged.add(watcher);
    });
  };
  return { dataDir, store, runId, recorder, logs, waitForLog };
}

function runEvent(
  runId: string,
  sequence: number,
  type: string,
  data: Record<string, unknown> = {},
  extra: Partial<RunEvent> = {},
): RunEvent {
  return {
    run_id: runId,
    type,
    sequence,
    timestamp: Date.now(),
    data,
    ...extra,
  };
}

Deno.test("what listeners see is what is stored, redacted, in order; the outcome is stored; nothing follows the terminal event", async () => {
  const secret = "sk-recorder-secret-1234";
  const { store, runId, recorder, logs } = await recorded({
    secrets: [secret],
  });
  try {
    const seen: RunEvent[] = [];
    recorder.subscribe((event) => seen.push(event));
    recorder.stopReplay();
    recorder.emit(runEvent(runId, 1, "run.started"));
    recorder.emit(
      runEvent(runId, 2, "message.delta", { text: `the key is ${secret}!` }),
    );
    recorder.emit(
      runEvent(runId, 3, "run.completed", { text: `done with ${secret}` }, {
        usage: { prompt_tokens: 7 },
      }),
    );
    recorder.emit(runEvent(runId, 4, "message.delta", { text: "late" }));
    await recorder.settled();
    const stored = await store.getEvents(runId);
    assert.deepEqual(seen, stored);
    assert.deepEqual(seen.map((event) => event.type), [
      "run.started",
      "message.delta",
      "run.completed",
    ]);
    assert.ok(!JSON.stringify(stored).includes(secret));
    assert.equal(seen[1].data.text, "the key is [REDACTED]!");
    const run = await store.getRun(runId);
    assert.equal(run?.status, "completed");
    assert.deepEqual(run?.usage, { prompt_tokens: 7 });
    const dropped = logs.find((entry) =>
      entry.msg === "event after the terminal event dropped"
    );
    assert.equal(dropped?.level, "error");
    assert.equal(dropped?.run_id, runId);
    assert.equal(dropped?.type, "message.delta");
  } finally {
    await store.close();
  }
});

for (
  const [code, status] of [
    ["run.cancelled", "cancelled"],
    ["agent.exited", "failed"],
  ] as const
) {
  Deno.test(`a run.failed with ${code} is stored as ${status}, with its code and message`, async () => {
    const { store, runId, recorder } = await recorded();
    try {
      recorder.emit(
        runEvent(runId, 1, "run.failed", { code, error: "it ended" }),
      );
      await recorder.settled();
      const run = await store.getRun(runId);
      assert.equal(run?.status, status);
      assert.equal(run?.code, code);
      assert.equal(run?.error, "it ended");
    } finally {
      await store.close();
    }
  });
}

Deno.test("a late subscriber gets the events before it until the replay stops; one that leaves gets no more; a listener that throws is logged and the others still get the event", async () => {
  const { store, runId, recorder, logs } = await recorded();
  try {
    recorder.emit(runEvent(runId, 1, "run.started"));
    await recorder.settled();
    const early: RunEvent[] = [];
    recorder.subscribe((event) => early.push(event));
    assert.deepEqual(early.map((event) => event.sequence), [1]);
    const leaving: RunEvent[] = [];
    const leave = recorder.subscribe((event) => leaving.push(event));
    // (A replayed event is handed over by `subscribe` itself, to its caller.)
    recorder.subscribe((event) => {
      if (event.sequence! > 1) throw new Error("listener broke");
    });
    recorder.emit(runEvent(runId, 2, "message.delta", { text: "a" }));
    await recorder.settled();
    leave();
    recorder.stopReplay();
    const late: RunEvent[] = [];
    recorder.subscribe((event) => late.push(event));
    recorder.emit(runEvent(runId, 3, "message.delta", { text: "b" }));
    await recorder.settled();
    assert.deepEqual(early.map((event) => event.sequence), [1, 2, 3]);
    assert.deepEqual(leaving.map((event) => event.sequence), [1, 2]);
    assert.deepEqual(late.map((event) => event.sequence), [3]);
    const failed = logs.filter((entry) =>
      entry.msg === "event listener failed"
    );
    assert.equal(failed.length, 2);
    assert.equal(failed[0].run_id, runId);
    assert.match(String(failed[0].error), /listener broke/);
  } finally {
    await store.close();
  }
});

Deno.test("the run's cost is what it added to its session's running cost, and the running cost is remembered with the session", async () => {
  const { store, runId, recorder } = await recorded({
    sessionCost: {
      sessionId: "session-cost",
      cost: { amount: 1.25, currency: "USD" },
    },
  });
  try {
    await store.putSession(KEY, "session-cost");
    const seen: RunEvent[] = [];
    recorder.subscribe((event) => seen.push(event));
    recorder.emit(
      runEvent(runId, 1, "run.completed", {}, {
        usage: { cost: { amount: 2, currency: "USD" }, prompt_tokens: 3 },
      }),
    );
    await recorder.settled();
    assert.deepEqual(seen[0].usage, {
      cost: { amount: 0.75, currency: "USD" },
      prompt_tokens: 3,
    });
    assert.deepEqual((await store.getRun(runId))?.usage, seen[0].usage);
    const session = await store.getSession(KEY);
    assert.deepEqual(session?.cost, { amount: 2, currency: "USD" });
  } finally {
    await store.close();
  }
});

Deno.test("a run that starts a new agent session counts the whole running cost of it, and remembers it with the new session", async () => {
  const { store, runId, recorder } = await recorded({
    sessionCost: {
      sessionId: "session-old",
      cost: { amount: 1.25, currency: "USD" },
    },
  });
  try {
    const seen: RunEvent[] = [];
    recorder.subscribe((event) => seen.push(event));
    recorder.emit(
      runEvent(runId, 1, "state.updated", {
        key: "external.acp_session_id",
        value: "session-new",
      }),
    );
    recorder.emit(
      runEvent(runId, 2, "run.completed", {}, {
        usage: { cost: { amount: 2, currency: "USD" } },
      }),
    );
    await recorder.settled();
    assert.deepEqual(seen[1].usage, { cost: { amount: 2, currency: "USD" } });
    const session = await store.getSession(KEY);
    assert.equal(session?.sessionId, "session-new");
    assert.deepEqual(session?.cost, { amount: 2, currency: "USD" });
  } finally {
    await store.close();
  }
});

Deno.test("while the store cannot write, listeners see nothing; once it can, they get every event and the terminal one, whose outcome the retried final write stored", async () => {
  const { dataDir, store, runId, recorder, waitForLog } = await recorded({
    busyTimeoutMs: 20,
  });
  // Another process's write lock: every write of the store fails meanwhile.
  const lock = new DatabaseSync(join(dataDir, "runner.db"));
  try {
    const seen: RunEvent[] = [];
    recorder.subscribe((event) => seen.push(event));
    recorder.stopReplay();
    lock.exec("BEGIN EXCLUSIVE");
    recorder.emit(runEvent(runId, 1, "message.delta", { text: "a" }));
    recorder.emit(runEvent(runId, 2, "run.completed"));
    const failed = await waitForLog((entry) =>
      entry.msg === "storing the run outcome failed"
    );
    assert.equal(failed.level, "error");
    assert.equal(failed.code, "store.unavailable");
    assert.equal(failed.retry, true);
    await assert.rejects(store.flush());
    assert.equal(seen.length, 0);
    lock.exec("ROLLBACK");
    await waitForLog((entry) =>
      entry.msg === "run outcome stored after retrying"
    );
    await recorder.settled();
    assert.deepEqual(seen.map((event) => event.sequence), [1, 2]);
    assert.deepEqual(seen, await store.getEvents(runId));
    assert.equal((await store.getRun(runId))?.status, "completed");
  } finally {
    lock.close();
    await store.close();
  }
});

Deno.test("an event queued when the store closes unable to write is never shown, and the log says so; nor is an event the closed store refused", async () => {
  const { dataDir, store, runId, recorder, logs, waitForLog } = await recorded({
    busyTimeoutMs: 20,
  });
  const lock = new DatabaseSync(join(dataDir, "runner.db"));
  try {
    const seen: RunEvent[] = [];
    recorder.subscribe((event) => seen.push(event));
    recorder.stopReplay();
    lock.exec("BEGIN EXCLUSIVE");
    recorder.emit(runEvent(runId, 1, "message.delta", { text: "a" }));
    await store.close().catch(() => {});
    await recorder.settled();
    const never = logs.filter((entry) =>
      entry.msg === "run events were never stored, so never shown"
    );
    assert.equal(never.length, 1);
    assert.deepEqual(
      [never[0].level, never[0].run_id, never[0].events, never[0].code],
      ["error", runId, 1, "store.unavailable"],
    );
    assert.ok(String(never[0].error).length > 0);
    recorder.emit(runEvent(runId, 2, "message.delta", { text: "c" }));
    const failed = await waitForLog((entry) =>
      entry.msg === "storing a run event failed"
    );
    assert.deepEqual(
      [failed.level, failed.run_id, failed.type, typeof failed.code],
      ["error", runId, "message.delta", "string"],
    );
    assert.ok(String(failed.error).length > 0);
    await recorder.settled();
    assert.deepEqual(seen, [], "neither event was stored, so neither shown");
  } finally {
    lock.exec("ROLLBACK");
    lock.close();
  }
});

Deno.test("while the store cannot write, a failed session id or cost write is logged as an error with its code", async () => {
  const { dataDir, store, runId, recorder, waitForLog } = await recorded({
    busyTimeoutMs: 20,
    sessionCost: {
      sessionId: "session-x",
      cost: { amount: 1, currency: "USD" },
    },
  });
  const lock = new DatabaseSync(join(dataDir, "runner.db"));
  try {
    lock.exec("BEGIN EXCLUSIVE");
    recorder.emit(
      runEvent(runId, 1, "state.updated", {
        key: "external.acp_session_id",
        value: "session-x",
      }),
    );
    recorder.emit(
      runEvent(runId, 2, "run.completed", {}, {
        usage: { cost: { amount: 3, currency: "USD" } },
      }),
    );
    const session = await waitForLog((entry) =>
      entry.msg === "storing a run event failed" &&
      entry.type === "state.updated"
    );
    assert.deepEqual(
      [session.level, session.run_id, session.code],
      ["error", runId, "store.unavailable"],
    );
    assert.match(String(session.error), /database is locked/);
    const cost = await waitForLog((entry) =>
      entry.msg === "storing the session's cost failed"
    );
    assert.deepEqual(
      [cost.level, cost.run_id, cost.code],
      ["error", runId, "store.unavailable"],
    );
    lock.exec("ROLLBACK");
    await waitForLog((entry) =>
      entry.msg === "run outcome stored after retrying"
    );
    await recorder.settled();
  } finally {
    lock.close();
    await store.close();
  }
});

Deno.test("the remembered session values stay as set when other events and state updates follow them", async () => {
  const { store, runId, recorder, logs } = await recorded({
    sessionCost: {
      sessionId: "session-kept",
      cost: { amount: 1.25, currency: "USD" },
    },
  });
  try {
    const seen: RunEvent[] = [];
    recorder.subscribe((event) => seen.push(event));
    recorder.emit(
      runEvent(runId, 1, "state.updated", {
        key: "external.acp_session_id",
        value: "session-kept",
      }),
    );
    recorder.emit(
      runEvent(runId, 2, "state.updated", {
        key: SESSION_SETTINGS_KEY,
        value: { model: "fast" },
      }),
    );
    recorder.emit(runEvent(runId, 3, "state.updated", {
      key: "external.other",
      value: { model: "slow" },
    }));
    recorder.emit(runEvent(runId, 4, "message.delta", { text: "a" }));
    recorder.emit(
      runEvent(runId, 5, "run.completed", {}, {
        usage: { cost: { amount: 2, currency: "USD" } },
      }),
    );
    await recorder.settled();
    const session = await store.getSession(KEY);
    assert.equal(session?.sessionId, "session-kept");
    assert.deepEqual(session?.settings, { model: "fast" });
    assert.deepEqual(session?.cost, { amount: 2, currency: "USD" });
    assert.deepEqual(seen.at(-1)?.usage, {
      cost: { amount: 0.75, currency: "USD" },
    });
    assert.deepEqual(logs, []);
  } finally {
    await store.close();
  }
});

Deno.test("a run with no stored session counts its whole cost and stores none; one without a conversation writes no session", async () => {
  for (const sessionKey of [KEY, undefined]) {
    const store = await openStore({ dataDir: tempDir() });
    try {
      const runId = "run-cost-alone";
      await store.createRun({ runId, config: {}, status: "active" });
      const logs: Record<string, unknown>[] = [];
      const recorder = createRunRecorder({
        store,
        runId,
        ...(sessionKey ? { sessionKey } : {}),
        secrets: [],
        log: (entry) => logs.push(entry),
      });
      const seen: RunEvent[] = [];
      recorder.subscribe((event) => seen.push(event));
      // Without a conversation the agent's session id is shown, not stored.
      if (!sessionKey) {
        recorder.emit(runEvent(runId, 0, "state.updated", {
          key: "external.acp_session_id",
          value: "session-alone",
        }));
      }
      recorder.emit(
        runEvent(runId, 1, "run.completed", {}, {
          usage: { cost: { amount: 2, currency: "USD" } },
        }),
      );
      await recorder.settled();
      assert.deepEqual(seen.at(-1)?.usage, {
        cost: { amount: 2, currency: "USD" },
      });
      assert.deepEqual(logs, []);
      assert.deepEqual(await store.listSessions(KEY.conversationId), []);
    } finally {
      await store.close();
    }
  }
});

Deno.test("a run with no events settles at once; settled() asked for while events wait covers the ones emitted after it", async () => {
  const { store, runId, recorder } = await recorded();
  try {
    await recorder.settled();
    const seen: RunEvent[] = [];
    recorder.subscribe((event) => seen.push(event));
    recorder.emit(runEvent(runId, 1, "message.delta", { text: "a" }));
    const first = recorder.settled();
    recorder.emit(runEvent(runId, 2, "message.delta", { text: "b" }));
    await first;
    assert.deepEqual(seen.map((event) => event.sequence), [1, 2]);
  } finally {
    await store.close();
  }
});

Deno.test("the final write is retried while the store is unavailable, and given up (retry: false) once it fails otherwise, as when the store closed", async () => {
  const { dataDir, store, runId, recorder, waitForLog } = await recorded({
    busyTimeoutMs: 20,
  });
  const lock = new DatabaseSync(join(dataDir, "runner.db"));
  try {
    lock.exec("BEGIN EXCLUSIVE");
    recorder.emit(runEvent(runId, 1, "run.completed"));
    const retried = await waitForLog((entry) =>
      entry.msg === "storing the run outcome failed"
    );
    assert.deepEqual([retried.retry, retried.code], [
      true,
      "store.unavailable",
    ]);
    await store.close().catch(() => {});
    const given = await waitForLog((entry) =>
      entry.msg === "storing the run outcome failed" && entry.retry === false
    );
    assert.notEqual(given.code, "store.unavailable");
    await recorder.settled();
  } finally {
    lock.exec("ROLLBACK");
    lock.close();
  }
});
