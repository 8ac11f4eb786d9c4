/**
 * Hub-side steering of `location=daemon` runs, with a real hub, run manager
 * and store and an in-process `runDaemonClient`: first with jobs the test
 * ends by hand (follow-ups carry text only, and a run that fails or is
 * cancelled hands its unprocessed follow-ups back in `unprocessed_inputs`),
 * then with the daemon's real job runner and the fixture agent crashing on a
 * follow-up.
 */

import { hubWithManager } from "../daemon_test_helpers.ts";
import assert from "node:assert/strict";
import { join } from "node:path";
import { parseRunConfig } from "../../lib/config.ts";
import { createReaperRegistry } from "../../lib/agent/reaper.ts";
import { type DaemonJob, runDaemonClient } from "../../lib/daemon/client.ts";
import { createDaemonJobRunner } from "../../lib/daemon/job.ts";
import { RunnerError } from "../../lib/errors.ts";
import type { JsonObject } from "../../lib/relay.ts";
import type { RunManager } from "../../lib/run/manager.ts";
import { EventLog, makeGate } from "../engine_helpers.ts";
import { fixtureCommand, tempDir } from "../helpers.ts";

const TOKEN = "daemon-steering-test-token-4b8e1c7d2a";

/** A daemon job the test ends by hand. */
interface HeldJob {
  payload: JsonObject;
  /** Emits the job's terminal event and lets it finish. */
  end(event: JsonObject): void;
  /** Resolves once the job was cancelled (its signal aborted). */
  cancelled: Promise<void>;
}

/** A hub, a run manager on it, and an in-process daemon `steer` whose jobs wait for the test. */
async function withSteeringHub(
  test: (
    ctx: { manager: RunManager; nextJob: () => Promise<HeldJob> },
  ) => Promise<void>,
): Promise<void> {
  const { server, manager, close } = await hubWithManager(TOKEN, () => {});
  const started: HeldJob[] = [];
  const waiters: ((job: HeldJob) => void)[] = [];
  const runJob = (job: DaemonJob) => {
    const finished = Promise.withResolvers<void>();
    const cancelled = new Promise<void>((resolve) =>
      job.signal.addEventListener("abort", () => {
        resolve();
        finished.resolve();
      }, { once: true })
    );
    const held: HeldJob = {
      payload: job.payload,
      end(event) {
        job.emit(event);
        finished.resolve();
      },
      cancelled,
    };
    const waiter = waiters.shift();
    if (waiter) waiter(held);
    else started.push(held);
    return finished.promise.then(() => ({ cleanupConfirmed: true }));
  };
  const controller = new AbortController();
  const client = runDaemonClient({
    url: server.url,
    daemonId: "steer",
    token: TOKEN,
    runJob,
    signal: controller.signal,
  });
  try {
    await test({
      manager,
      nextJob: () => {
        const job = started.shift();
        if (job) return Promise.resolve(job);
        return new Promise((resolve) => waiters.push(resolve));
      },
    });
  } finally {
    controller.abort();
    await client;
    await close();
  }
}

const config = parseRunConfig({
  provider: "custom",
  "acp-command": "agent-on-the-daemon",
  location: "daemon",
  "daemon-id": "steer",
  workspace: "/tmp",
});

const completed = (text: string) => ({
  type: "run.completed",
  data: {
    finish_reason: "end_turn",
    message: { role: "assistant", content: text },
  },
});

Deno.test("a failing follow-up job ends the run with its failure and hands back the rest; follow-ups carry text only", async () => {
  await withSteeringHub(async ({ manager, nextJob }) => {
    const start = (input: { text: string; attachments?: JsonObject[] }) =>
      manager.start({ conversationId: "c", input, config });
    const { run } = await start({ text: "first" });
    const log = new EventLog(run);
    const first = await nextJob();
    assert.equal(first.payload.prompt_text, "first");
    const image = { type: "image", name: "a.png", content: "iVBORw0KGgo=" };
    assert.equal(
      (await start({ text: "f1", attachments: [image] })).kind,
      "steered",
    );
    assert.equal((await start({ text: "f2" })).kind, "steered");
    assert.equal((await start({ text: "f3" })).kind, "steered");
    first.end(completed("one"));

    const second = await nextJob();
    const note = "[Attachments on follow-up messages are not forwarded: a.png]";
    assert.equal(second.payload.prompt_text, `f1\n\n${note}`);
    assert.deepEqual(second.payload.input, {
      text: `f1\n\n${note}`,
      attachments: [],
    });
    second.end({
      type: "run.failed",
      data: {
        error: "the agent exited",
        code: "acp.process_exited",
        retryable: false,
      },
    });

    const result = await run.done;
    assert.deepEqual([result.status, result.code], [
      "failed",
      "acp.process_exited",
    ]);
    const terminal = log.events.filter((event) =>
      event.type === "run.completed" || event.type === "run.failed"
    );
    assert.equal(terminal.length, 1, JSON.stringify(terminal));
    assert.deepEqual(terminal[0].data, {
      error: "the agent exited",
      code: "acp.process_exited",
      retryable: false,
      unprocessed_inputs: [{ text: "f2" }, { text: "f3" }],
    });
    assert.deepEqual(
      log.events.map((event) => event.sequence),
      log.events.map((_, index) => index + 1),
    );
    // The hub says which turn the follow-up job is, with what was sent
    // (the attachment by name only), before the job's own events.
    assert.deepEqual(
      log.events.map((event) => event.type),
      ["turn.started", "run.failed"],
    );
    assert.deepEqual(log.events[0].data, {
      turn: 2,
      input: { text: "f1", attachments: [{ name: "a.png" }] },
    });
  });
});

Deno.test("a cancelled run hands back its queued follow-ups", async () => {
  await withSteeringHub(async ({ manager, nextJob }) => {
    const { run } = await manager.start({
      conversationId: "c",
      input: { text: "first" },
      config,
    });
    const log = new EventLog(run);
    const job = await nextJob();
    assert.equal(
      (await manager.start({
        conversationId: "c",
        input: { text: "later" },
        config,
      })).kind,
      "steered",
    );
    run.handle.cancel();
    await job.cancelled;
    const result = await run.done;
    assert.equal(result.status, "cancelled");
    assert.equal(log.events.length, 1, JSON.stringify(log.events));
    const [terminal] = log.events;
    assert.equal(terminal.type, "run.failed");
    assert.equal(terminal.data.code, "run.cancelled");
    assert.deepEqual(terminal.data.unprocessed_inputs, [{ text: "later" }]);
  });
});

Deno.test("through the daemon's real job runner, an agent crash on a follow-up ends the run and hands back the follow-ups after it", async () => {
  const { store, server, manager, close } = await hubWithManager(
    TOKEN,
    () => {},
  );
  const jobs = createDaemonJobRunner({
    registry: createReaperRegistry(join(tempDir(), "agents")),
  });
  const controller = new AbortController();
  const client = runDaemonClient({
    url: server.url,
    daemonId: "real",
    token: TOKEN,
    runJob: jobs.runJob,
    signal: controller.signal,
  });
  try {
    const gate = await makeGate();
    const crashing = parseRunConfig({
      provider: "custom",
      "acp-command": fixtureCommand(
        "--gate-fifo",
        gate.path,
        "--exit-on-prompt",
        "crash-now",
      ),
      location: "daemon",
      "daemon-id": "real",
      workspace: tempDir(),
    });
    const start = (text: string) =>
      manager.start({ conversationId: "c", input: { text }, config: crashing });
    const { run } = await start("first");
    const log = new EventLog(run);
    await log.waitFor((event) => event.type === "message.delta");
    for (const text of ["crash-now", "f2", "f3"]) {
      assert.equal((await start(text)).kind, "steered", text);
    }
    await gate.release();
    const result = await run.done;
    assert.deepEqual([result.status, result.code], [
      "failed",
      "acp.process_exited",
    ]);
    assert.deepEqual(log.messages(), ["echo: first (turn 1)"]);
    const terminal = log.events.filter((event) =>
      event.type === "run.completed" || event.type === "run.failed"
    );
    assert.equal(terminal.length, 1, JSON.stringify(terminal));
    assert.equal(log.events.at(-1), terminal[0]);
    assert.equal(terminal[0].data.code, "acp.process_exited");
    assert.match(String(terminal[0].data.stderr_tail), /fixture crashing/);
    assert.deepEqual(terminal[0].data.unprocessed_inputs, [
      { text: "f2" },
      { text: "f3" },
    ]);
    assert.deepEqual(
      log.events.map((event) => event.sequence),
      log.events.map((_, index) => index + 1),
    );
    assert.equal((await store.getRun(run.runId))?.status, "failed");
  } finally {
    await manager.shutdown(
      new RunnerError("runner.shutting_down", "The test ended."),
    );
    controller.abort();
    await client;
    await close();
  }
});
