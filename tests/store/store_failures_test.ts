/**
 * A store that cannot write while runs go on (another process holds the
 * SQLite write lock, as a full disk would refuse writes): a run's events are
 * withheld from its readers until they are stored (nobody sees an event a
 * crash could lose), the final write is retried until it lands, failures are
 * logged as errors, `/healthz` reports `degraded` meanwhile, and no run ever
 * holds two terminal events — not even after a restart.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import type { RunEvent } from "../../lib/events.ts";
import { openStore } from "../../lib/store/open.ts";
import { tempDir } from "../helpers.ts";
import { startInProcessServe } from "../in_process_serve.ts";
import {
  agentCommand,
  apiFetch,
  gateIn,
  openGate,
  postJson,
  streamUntil,
  terminals,
} from "../serve_test_helpers.ts";

Deno.test("while the store cannot write, a run's events are withheld; they arrive with one terminal event once the retried final write lands; /healthz is degraded meanwhile", async () => {
  const dataDir = tempDir();
  const serve = await startInProcessServe({
    dataDir,
    args: ["--allow-custom-commands"],
    store: { busyTimeoutMs: 20 },
  });
  const gate = await gateIn(tempDir());
  let lock: DatabaseSync | undefined;
  try {
    const response = await postJson(`${serve.url}/v1/runs`, {
      input: { text: "hi" },
      config: {
        provider: "custom",
        "acp-command": agentCommand(["--gate-fifo", gate]),
        workspace: tempDir(),
      },
    });
    const runId = response.headers.get("x-run-id")!;
    const { events, messages } = await streamUntil(response, "message.delta");

    // Another process takes the write lock: every write of the runner fails.
    lock = new DatabaseSync(join(dataDir, "runner.db"));
    lock.exec("BEGIN EXCLUSIVE");
    const storedLast = Number(
      (lock.prepare(
        "SELECT MAX(sequence) AS last FROM events WHERE run_id = ?",
      ).get(runId) as { last: number }).last,
    );
    const rest = (async () => {
      for await (const message of messages) {
        events.push(JSON.parse(message.data));
      }
    })();
    await openGate(gate);
    const failed = await serve.waitForLog((e) =>
      e.msg === "storing the run outcome failed"
    );
    assert.equal(failed.level, "error");
    assert.equal(failed.code, "store.unavailable");
    const degraded = await apiFetch(`${serve.url}/healthz`);
    assert.equal(degraded.status, 503);
    const health = await degraded.json();
    assert.equal(health.status, "degraded");
    assert.match(health.store.error, /database is locked/);
    // The run has ended, but its reader saw nothing that is not stored.
    assert.deepEqual(terminals(events), []);
    for (const event of events) assert.ok(event.sequence! <= storedLast);
    // Status and the active flag agree while the outcome waits for the store.
    const waiting = await (await apiFetch(`${serve.url}/v1/runs/${runId}`))
      .json();
    assert.equal(waiting.active, waiting.status === "active");
    const listed = await (await apiFetch(`${serve.url}/v1/runs`)).json();
    for (const run of listed.runs as { status: string; active: boolean }[]) {
      assert.equal(run.active, run.status === "active");
    }

    lock.exec("COMMIT");
    lock.close();
    lock = undefined;
    await rest;
    assert.deepEqual(terminals(events).map((e) => e.type), ["run.completed"]);
    await serve.waitForLog((e) =>
      e.msg === "run outcome stored after retrying"
    );
    const run = await (await apiFetch(`${serve.url}/v1/runs/${runId}`)).json();
    assert.equal(run.status, "completed");
    assert.equal(terminals(run.events).length, 1);
    assert.deepEqual(
      run.events.map((e: RunEvent) => e.sequence),
      events.map((e) => e.sequence),
    );
    assert.equal((await apiFetch(`${serve.url}/healthz`)).status, 200);
  } finally {
    lock?.exec("COMMIT");
    lock?.close();
    await serve.close();
  }
  // After a restart the run still has its one terminal event.
  const reopened = await openStore({ dataDir });
  try {
    assert.deepEqual(
      await reopened.markActiveRunsFailed("runner.restarted", "x"),
      [],
    );
  } finally {
    reopened.close();
  }
});

Deno.test("a run whose terminal event was stored but not its outcome is finished with that event on restart, not failed again", async () => {
  const dataDir = tempDir();
  const crashed = await openStore({ dataDir });
  await crashed.createRun({ runId: "r1", config: {}, status: "active" });
  crashed.appendEvent("r1", {
    run_id: "r1",
    type: "message.delta",
    data: { chunk: { type: "text", content: "hi" } },
  });
  crashed.appendEvent("r1", {
    run_id: "r1",
    type: "run.completed",
    data: { message: { role: "assistant", content: "hi" } },
  });
  // The process "dies" here: the events are stored, finishRun never ran.
  crashed.close();

  const store = await openStore({ dataDir });
  try {
    assert.deepEqual(
      await store.markActiveRunsFailed("runner.restarted", "x"),
      ["r1"],
    );
    assert.equal((await store.getRun("r1"))?.status, "completed");
    assert.deepEqual((await store.getEvents("r1")).map((e) => e.type), [
      "message.delta",
      "run.completed",
    ]);
  } finally {
    await store.close();
  }
});
