import assert from "node:assert/strict";
import { join } from "node:path";
import {
  EventLog,
  fixtureConfig,
  harness,
  makeGate,
} from "./engine_helpers.ts";
import { assertAgentGone, readRecord, tempDir } from "./helpers.ts";

Deno.test("three follow-ups during a run become four turns on one session with one run.completed", async () => {
  const h = harness();
  try {
    const gate = await makeGate();
    const record = join(tempDir(), "record.jsonl");
    const config = fixtureConfig([
      "--gate-fifo",
      gate.path,
      "--record",
      record,
    ]);
    const started = await h.manager.start({
      conversationId: "c",
      input: { text: "first" },
      config,
    });
    assert.equal(started.kind, "started");
    const log = new EventLog(started.run);
    await log.waitFor((e) => e.type === "message.delta");
    for (const text of ["f1", "f2", "f3"]) {
      const steered = await h.manager.start({
        conversationId: "c",
        input: { text },
        config,
      });
      assert.equal(steered.kind, "steered");
      assert.equal(steered.run.runId, started.run.runId);
    }
    for (let i = 0; i < 4; i++) await gate.release();
    const result = await started.run.done;
    assert.equal(result.status, "completed");
    assert.deepEqual(log.messages(), [
      "echo: first (turn 1)",
      "echo: f1 (turn 2)",
      "echo: f2 (turn 3)",
      "echo: f3 (turn 4)",
    ]);
    assert.equal(log.ofType("run.completed").length, 1);
    assert.equal(log.ofType("run.failed").length, 0);
    const prompts = readRecord(record).filter((line) =>
      line.method === "session/prompt"
    );
    const sessions = new Set(
      prompts.map((line) => (line.params as { sessionId: string }).sessionId),
    );
    assert.equal(prompts.length, 4);
    assert.equal(sessions.size, 1);
  } finally {
    await h.close();
  }
});

Deno.test("a follow-up arriving after the queue closed starts a new run and is never lost", async () => {
  const h = harness();
  try {
    // The grandchild ignores SIGTERM, so teardown holds the closing run open
    // for a while after its queue has closed.
    const config = fixtureConfig([
      "--grandchild",
      "--resume",
      "--state-dir",
      tempDir(),
    ]);
    const first = await h.manager.start({
      conversationId: "race",
      input: { text: "one" },
      config,
    });
    const log = new EventLog(first.run);
    await log.waitFor((e) => e.type === "message.completed");
    // message.completed is emitted just before the engine looks at its queue
    // for the last time; one macrotask later that look has happened.
    await new Promise((resolve) => setTimeout(resolve, 0));
    const late = await h.manager.start({
      conversationId: "race",
      input: { text: "late" },
      config,
    });
    let texts: string[];
    if (late.kind === "steered") {
      await first.run.done;
      texts = log.messages();
    } else {
      const lateLog = new EventLog(late.run);
      await Promise.all([first.run.done, late.run.done]);
      texts = [...log.messages(), ...lateLog.messages()];
      assert.equal(lateLog.ofType("run.completed").length, 1);
    }
    assert.ok(
      texts.some((text) => text.startsWith("echo: late")),
      `lost: ${texts}`,
    );
    assert.equal(log.ofType("run.completed").length, 1);
  } finally {
    await h.close();
  }
});

Deno.test("steering is refused past 100 queued follow-ups", async () => {
  const h = harness();
  try {
    const gate = await makeGate();
    const config = fixtureConfig(["--gate-fifo", gate.path, "--text", "x"], {
      "reuse-session": "false",
    });
    const first = await h.manager.start({
      conversationId: "cap",
      input: { text: "one" },
      config,
    });
    const log = new EventLog(first.run);
    await log.waitFor((e) => e.type === "message.delta");
    for (let i = 0; i < 100; i++) {
      assert.equal(
        (await h.manager.start({
          conversationId: "cap",
          input: { text: `q${i}` },
          config,
        })).kind,
        "steered",
      );
    }
    await assert.rejects(
      () =>
        h.manager.start({
          conversationId: "cap",
          input: { text: "too many" },
          config,
        }),
      /100 queued follow-ups/,
    );
    first.run.handle.cancel();
    await first.run.done;
    assert.equal(log.events.at(-1)?.data.code, "run.cancelled");
  } finally {
    await h.close();
  }
});

Deno.test("cancel mid-turn leaves no process and one run.failed run.cancelled", async () => {
  const h = harness();
  try {
    const pidFile = join(tempDir(), "pids.json");
    const config = fixtureConfig(
      [
        "--stall-prompt",
        "--ignore-cancel",
        "--grandchild",
        "--pid-file",
        pidFile,
      ],
      { "cancel-grace": "0.5" },
    );
    const { run } = await h.manager.start({ input: { text: "hi" }, config });
    const log = new EventLog(run);
    await log.waitFor((e) => e.type === "message.delta");
    run.handle.cancel();
    const result = await run.done;
    assert.equal(result.status, "cancelled");
    const terminal = log.events.filter((e) =>
      e.type === "run.failed" || e.type === "run.completed"
    );
    assert.equal(terminal.length, 1);
    assert.equal(terminal[0].data.code, "run.cancelled");
    assertAgentGone(pidFile);
    assert.equal((await h.store.getRun(run.runId))?.status, "cancelled");
  } finally {
    await h.close();
  }
});

Deno.test("a cooperative agent answers the cancel with stopReason cancelled", async () => {
  const h = harness();
  try {
    const record = join(tempDir(), "record.jsonl");
    const config = fixtureConfig(["--stall-prompt", "--record", record]);
    const { run } = await h.manager.start({ input: { text: "hi" }, config });
    const log = new EventLog(run);
    await log.waitFor((e) => e.type === "message.delta");
    run.handle.cancel();
    await run.done;
    assert.equal(log.events.at(-1)?.data.code, "run.cancelled");
    assert.ok(
      readRecord(record).some((line) => line.method === "session/cancel"),
    );
  } finally {
    await h.close();
  }
});

Deno.test("the run timeout ends a stalled run with run.timeout", async () => {
  const h = harness();
  try {
    const config = fixtureConfig(["--stall-prompt"], {
      timeout: "1",
      "cancel-grace": "0.5",
    });
    const { run } = await h.manager.start({ input: { text: "hi" }, config });
    const log = new EventLog(run);
    await run.done;
    assert.equal(log.events.at(-1)?.data.code, "run.timeout");
  } finally {
    await h.close();
  }
});

Deno.test("permission-decision picks the wanted option, or the nearest of its family", async (t) => {
  const cases: Array<[string, string, string]> = [
    [
      "allow_once",
      "allow_once,allow_always,reject_once,reject_always",
      "allow_once",
    ],
    [
      "reject_once",
      "allow_once,allow_always,reject_once,reject_always",
      "reject_once",
    ],
    ["allow_once", "allow_always,reject_once", "allow_always"],
    ["reject_always", "allow_once,reject_once", "reject_once"],
  ];
  for (const [wanted, offered, expected] of cases) {
    await t.step(`${wanted} with ${offered}`, async () => {
      const h = harness();
      try {
        const config = fixtureConfig([
          "--permission",
          "--permission-options",
          offered,
        ], {
          "permission-decision": wanted,
        });
        const { run } = await h.manager.start({
          input: { text: "hi" },
          config,
        });
        const log = new EventLog(run);
        await run.done;
        assert.ok(
          log.messages()[0].startsWith(`permission: ${expected}\n`),
          log.messages()[0],
        );
        const decided = log.ofType("permission.decided")[0];
        assert.equal(decided.data.option_id, expected);
        assert.equal(decided.data.exact, wanted === expected);
      } finally {
        await h.close();
      }
    });
  }
});
