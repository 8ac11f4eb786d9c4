import assert from "node:assert/strict";
import { join } from "node:path";
import { RunnerError } from "../../lib/errors.ts";
import type { StartOutcome } from "../../lib/run/manager.ts";
import type { RunEvent } from "../../lib/events.ts";
import {
  cancelAfterFirstDelta,
  EventLog,
  fixtureConfig,
  type Harness,
  makeGate,
  stubbornAgentFlags,
  withHarness,
} from "../engine_helpers.ts";
import { assertAgentGone, readRecord, tempDir } from "../helpers.ts";

Deno.test("three follow-ups during a run become four turns on one session with one run.completed", async () => {
  await withHarness(async (h) => {
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
  });
});

Deno.test("each follow-up turn begins with a stored turn.started: its text redacted, its attachments by name only, also with streaming=false", async (t) => {
  for (const streaming of ["true", "false"]) {
    await t.step(`streaming=${streaming}`, async () => {
      await withHarness(async (h) => {
        const gate = await makeGate();
        const secret = "steer-secret-value-71Kq9";
        const config = fixtureConfig(["--gate-fifo", gate.path], {
          streaming,
          "env-json": JSON.stringify({ SERVICE_TOKEN: secret }),
        });
        const started = await h.manager.start({
          conversationId: "turns",
          input: { text: "first" },
          config,
        });
        const log = new EventLog(started.run);
        await log.waitFor((e) => e.type === "run.started");
        const follow = [
          { text: `use ${secret} <b>now</b>` },
          {
            text: "see the file",
            attachments: [{
              name: "notes.txt",
              mime_type: "text/plain",
              content: btoa("file body never in an event"),
            }],
          },
        ];
        for (const input of follow) {
          const steered = await h.manager.start({
            conversationId: "turns",
            input,
            config,
          });
          assert.equal(steered.kind, "steered");
        }
        for (let i = 0; i < 3; i++) await gate.release();
        assert.equal((await started.run.done).status, "completed");
        const expected = [
          { turn: 2, input: { text: "use [REDACTED] <b>now</b>" } },
          {
            turn: 3,
            input: {
              text: "see the file",
              attachments: [{ name: "notes.txt", mime_type: "text/plain" }],
            },
          },
        ];
        assert.deepEqual(
          log.ofType("turn.started").map((e) => e.data),
          expected,
        );
        // Each comes after the previous turn's answer, before its own.
        const order = log.events
          .filter((e) =>
            e.type === "turn.started" || e.type === "message.completed"
          )
          .map((e) =>
            e.type === "turn.started" ? `turn ${e.data.turn}` : "answer"
          );
        assert.deepEqual(order, [
          "answer",
          "turn 2",
          "answer",
          "turn 3",
          "answer",
        ]);
        // Stored: a reload or another reader gets the same events.
        const stored = await h.store.getEvents(started.run.runId);
        assert.deepEqual(
          stored.filter((e) => e.type === "turn.started").map((e) => e.data),
          expected,
        );
        const text = JSON.stringify(stored);
        assert.ok(
          !text.includes(secret),
          "the secret reached the stored events",
        );
        assert.ok(!text.includes(btoa("file body never in an event")));
      });
    });
  }
});

// The race between a follow-up and the run's last look at its queue, forced
// both ways: a follow-up sent as an event is appended to the store (where
// the engine emits it) lands at an exact point of the run; listeners get the
// event once it is committed, a commit later.

Deno.test("a follow-up that arrives as the last turn completes, before the queue closes, is answered in the same run", async () => {
  let sent: ReturnType<Harness["manager"]["start"]> | undefined;
  let onAppend: ((event: RunEvent) => void) | undefined;
  await withHarness({ onAppend: (event) => onAppend?.(event) }, async (h) => {
    const config = fixtureConfig([]);
    onAppend = (event) => {
      // message.completed of turn 1 comes just before the engine's last look
      // at the queue.
      if (event.type === "message.completed" && !sent) {
        sent = h.manager.start({
          conversationId: "race",
          input: { text: "late" },
          config,
        });
      }
    };
    const first = await h.manager.start({
      conversationId: "race",
      input: { text: "one" },
      config,
    });
    const log = new EventLog(first.run);
    const result = await first.run.done;
    const late = await sent;
    assert.equal(late?.kind, "steered");
    assert.equal(late?.run.runId, first.run.runId);
    assert.equal(result.status, "completed");
    assert.deepEqual(log.messages(), [
      "echo: one (turn 1)",
      "echo: late (turn 2)",
    ]);
    assert.equal(log.ofType("run.completed").length, 1);
  });
});

Deno.test("a follow-up that arrives after the queue closed, while the run is still active, starts a new run and is never lost", async () => {
  await withHarness(async (h) => {
    const config = fixtureConfig(["--resume", "--state-dir", tempDir()]);
    const first = await h.manager.start({
      conversationId: "race",
      input: { text: "one" },
      config,
    });
    const log = new EventLog(first.run);
    let sent: ReturnType<typeof h.manager.start> | undefined;
    let stillActive = false;
    first.run.subscribe((event) => {
      // At its terminal event the run has closed its queue and torn down,
      // but it is still the conversation's active run.
      if (event.type !== "run.completed") return;
      stillActive = h.manager.activeForConversation("race") === first.run;
      sent = h.manager.start({
        conversationId: "race",
        input: { text: "late" },
        config,
      });
    });
    await first.run.done;
    const late = await sent;
    // Subscribed in the task start() resolved in: the early events are replayed.
    const lateLog = late && new EventLog(late.run);
    assert.equal(stillActive, true);
    assert.deepEqual(log.messages(), ["echo: one (turn 1)"]);
    assert.equal(late?.kind, "started");
    assert.notEqual(late.run.runId, first.run.runId);
    const lateResult = await late.run.done;
    assert.equal(lateResult.status, "completed");
    // Same conversation, same agent session: the second turn of it.
    assert.deepEqual(lateLog?.messages(), ["echo: late (turn 2)"]);
    assert.equal(log.ofType("run.completed").length, 1);
  });
});

Deno.test("a follow-up sent a few microtasks after the last turn completed is never lost", async () => {
  await withHarness(async (h) => {
    const config = fixtureConfig([]);
    /** Resolves after exactly `depth` turns of the microtask queue. */
    const hops = (depth: number): Promise<void> => {
      let chain = Promise.resolve();
      for (let i = 0; i < depth; i++) chain = chain.then(() => {});
      return chain;
    };
    const depths = Array.from({ length: 12 }, (_, depth) => depth);
    const trials = depths.map(async (depth) => {
      const conversationId = `hops-${depth}`;
      const first = await h.manager.start({
        conversationId,
        input: { text: "one" },
        config,
      });
      const log = new EventLog(first.run);
      const late = Promise.withResolvers<
        { outcome: StartOutcome; log: EventLog }
      >();
      let sent = false;
      first.run.subscribe((event) => {
        if (event.type !== "message.completed" || sent) return;
        sent = true;
        hops(depth).then(async () => {
          const outcome = await h.manager.start({
            conversationId,
            input: { text: "late" },
            config,
          });
          // Subscribe at once: a new run may finish before the test looks.
          late.resolve({ outcome, log: new EventLog(outcome.run) });
        });
      });
      await first.run.done;
      const { outcome, log: lateLog } = await late.promise;
      if (outcome.kind === "steered") {
        assert.deepEqual(
          log.messages(),
          ["echo: one (turn 1)", "echo: late (turn 2)"],
          `depth ${depth}: steered but not answered`,
        );
      } else {
        const result = await outcome.run.done;
        assert.deepEqual(
          lateLog.messages(),
          ["echo: late (turn 1)"],
          `depth ${depth}: ${JSON.stringify(result)} ${
            JSON.stringify(lateLog.events.map((e) => [e.type, e.data.code]))
          }`,
        );
      }
    });
    await Promise.all(trials);
  });
});

Deno.test("steering is refused past 100 queued follow-ups", async () => {
  await withHarness(async (h) => {
    const gate = await makeGate();
    // "x." not "x": a lone "x" is held back while the agent waits at the
    // gate whenever the run token happens to begin with it.
    const config = fixtureConfig(["--gate-fifo", gate.path, "--text", "x."], {
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
      (error) => {
        assert.ok(error instanceof RunnerError);
        assert.equal(error.code, "run.steering_queue_full");
        assert.equal(error.retryable, true);
        assert.match(error.message, /100 queued follow-ups/);
        return true;
      },
    );
    first.run.handle.cancel();
    await first.run.done;
    assert.equal(log.events.at(-1)?.data.code, "run.cancelled");
  });
});

Deno.test("cancel mid-turn leaves no process and one run.failed run.cancelled", async () => {
  await withHarness(async (h) => {
    const pidFile = join(tempDir(), "pids.json");
    const config = fixtureConfig(
      stubbornAgentFlags(pidFile),
      { "cancel-grace": "0.5" },
    );
    const { run, log, result } = await cancelAfterFirstDelta(h.manager, {
      input: { text: "hi" },
      config,
    });
    assert.equal(result.status, "cancelled");
    const terminal = log.events.filter((e) =>
      e.type === "run.failed" || e.type === "run.completed"
    );
    assert.equal(terminal.length, 1);
    assert.equal(terminal[0].data.code, "run.cancelled");
    assertAgentGone(pidFile);
    assert.equal((await h.store.getRun(run.runId))?.status, "cancelled");
  });
});

Deno.test("a cooperative agent answers the cancel with stopReason cancelled", async () => {
  await withHarness(async (h) => {
    const record = join(tempDir(), "record.jsonl");
    const config = fixtureConfig(["--stall-prompt", "--record", record]);
    const { log } = await cancelAfterFirstDelta(h.manager, {
      input: { text: "hi" },
      config,
    });
    assert.equal(log.events.at(-1)?.data.code, "run.cancelled");
    assert.ok(
      readRecord(record).some((line) => line.method === "session/cancel"),
    );
  });
});

Deno.test("the run timeout ends a stalled run with run.timeout", async () => {
  await withHarness(async (h) => {
    const config = fixtureConfig(["--stall-prompt"], {
      timeout: "1",
      "cancel-grace": "0.5",
    });
    const { run } = await h.manager.start({ input: { text: "hi" }, config });
    const log = new EventLog(run);
    await run.done;
    assert.equal(log.events.at(-1)?.data.code, "run.timeout");
  });
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
      await withHarness(async (h) => {
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
      });
    });
  }
});
