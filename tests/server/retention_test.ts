/**
 * Retention in `runner serve` (`--retain-runs-days`, `--retain-runs`): the
 * timer's first pass at start deletes finished runs past either bound with
 * their events and counts them in `/metrics`; a run waiting for a permission
 * answer (an active run) and a conversation's session mapping are kept, and
 * the answer still reaches the run afterwards.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import {
  loadServeConfig,
  type ServeConfig,
} from "../../lib/server/config/serve_config.ts";
import { openStore, STORE_FILE_NAME } from "../../lib/store/open.ts";
import { tempDir } from "../helpers.ts";
import { startInProcessServe } from "../in_process_serve.ts";
import { KEY } from "../store_suite.ts";
import {
  apiFetch,
  fixtureConfig,
  postJson,
  startServe,
  streamUntil,
  terminals,
} from "../serve_test_helpers.ts";

const DAY_MS = 86_400_000;

Deno.test("retention defaults to 30 days and 100 000 runs; 0 keeps; bad values are refused", async () => {
  const dataDir = ["--data-dir", "/tmp/unused"];
  const defaults = await loadServeConfig(dataDir, { env: {} }) as ServeConfig;
  assert.deepEqual(defaults.retention, { maxAgeDays: 30, maxRuns: 100_000 });
  const set = await loadServeConfig([...dataDir, "--retain-runs-days", "0"], {
    env: { RUNNER_RETAIN_RUNS: "500" },
  }) as ServeConfig;
  assert.deepEqual(set.retention, { maxAgeDays: 0, maxRuns: 500 });
  for (
    const [args, message] of [
      [["--retain-runs", "1.5"], /retain-runs: must be a whole number/],
      [["--retain-runs-days=-1"], /retain-runs-days: must be a number/],
      [["--retain-runs-days", "40000"], /at most 36500 days/],
    ] as const
  ) {
    await assert.rejects(
      () => loadServeConfig([...dataDir, ...args], { env: {} }),
      { code: "config.invalid", message },
    );
  }
});

Deno.test("runner serve prunes finished runs older than --retain-runs-days and past --retain-runs at start, keeps sessions, and counts it in /metrics", async () => {
  const dir = tempDir("runner-retention-");
  const dataDir = join(dir, "data");
  const store = await openStore({ dataDir });
  await store.putSession(KEY, "sess-1");
  for (const runId of ["old-0", "old-1", "new-0", "new-1", "new-2", "new-3"]) {
    await store.createRun({
      runId,
      conversationId: KEY.conversationId,
      config: {},
      status: "active",
    });
    store.appendEvent(runId, {
      run_id: "",
      type: "message.delta",
      data: { text: runId },
    });
    store.appendEvent(runId, { run_id: "", type: "run.completed", data: {} });
    await store.finishRun(runId, { status: "completed" });
  }
  await store.close();
  const db = new DatabaseSync(join(dataDir, STORE_FILE_NAME));
  db.prepare("UPDATE runs SET created_at = ? WHERE run_id LIKE 'old-%'")
    .run(Date.now() - 40 * DAY_MS);
  db.close();

  const serve = await startServe({ dataDir, args: ["--retain-runs", "3"] });
  try {
    const pruned = await serve.waitForLog((e) => e.msg === "pruned old runs");
    assert.deepEqual([pruned.runs, pruned.events], [3, 6]);
    const { runs } = await (await apiFetch(`${serve.url}/v1/runs`)).json();
    assert.deepEqual(
      runs.map((run: { run_id: string }) => run.run_id),
      ["new-3", "new-2", "new-1"],
    );
    assert.equal((await apiFetch(`${serve.url}/v1/runs/old-0`)).status, 404);
    const conversation = await (await apiFetch(
      `${serve.url}/v1/conversations/${KEY.conversationId}`,
    )).json();
    assert.deepEqual(
      conversation.sessions.map((s: { session_id: string }) => s.session_id),
      ["sess-1"],
    );
    const metrics = await (await apiFetch(`${serve.url}/metrics`)).text();
    assert.match(
      metrics,
      /^runner_store_pruned_rows_total\{table="runs"\} 3$/m,
    );
    assert.match(
      metrics,
      /^runner_store_pruned_rows_total\{table="events"\} 6$/m,
    );
    assert.match(metrics, /^runner_store_prune_duration_seconds_count 1$/m);
    const size = /^runner_store_size_bytes (\d+)$/m.exec(metrics);
    assert.ok(size && Number(size[1]) > 0, metrics);
  } finally {
    await serve.stop();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a run waiting for a permission answer is never pruned, and the answer still reaches it", async () => {
  const dataDir = tempDir("runner-retention-");
  const workspace = tempDir("runner-retention-ws-");
  const serve = await startInProcessServe({
    dataDir,
    args: ["--allow-custom-commands", "--retain-runs", "1"],
  });
  try {
    const asked = await postJson(`${serve.url}/v1/runs`, {
      conversation_id: "asking",
      input: { text: "write the file" },
      config: {
        ...fixtureConfig(workspace, ["--permission"]),
        "permission-decision": "ask",
      },
    });
    const { events, messages } = await streamUntil(
      asked,
      "permission.requested",
    );
    const { run_id: runId, data } = events.at(-1)!;
    const finished: string[] = [];
    for (let index = 0; index < 3; index++) {
      const response = await postJson(`${serve.url}/v1/runs?stream=false`, {
        input: { text: "hi" },
        config: fixtureConfig(workspace),
      });
      finished.push((await response.json()).run_id);
    }

    let doomedEvents = 0;
    for (const id of finished.slice(0, 2)) {
      const run = await (await apiFetch(`${serve.url}/v1/runs/${id}`)).json();
      doomedEvents += run.events.length;
    }
    assert.deepEqual(await serve.retention.pass(), {
      runs: 2,
      events: doomedEvents,
    });
    const listed = await (await apiFetch(`${serve.url}/v1/runs`)).json();
    assert.deepEqual(
      listed.runs.map((run: { run_id: string }) => run.run_id),
      [finished[2], runId],
    );
    const answered = await postJson(
      `${serve.url}/v1/runs/${runId}/permissions/${data.request_id}`,
      { option_id: "allow_once" },
    );
    assert.equal(answered.status, 200);
    for await (const message of messages) events.push(JSON.parse(message.data));
    assert.equal(terminals(events)[0].type, "run.completed");

    // Ended, it is the oldest finished run past the newest one.
    assert.equal((await serve.retention.pass()).runs, 1);
    assert.equal((await apiFetch(`${serve.url}/v1/runs/${runId}`)).status, 404);
  } finally {
    await serve.close();
    await Deno.remove(dataDir, { recursive: true });
    await Deno.remove(workspace, { recursive: true });
  }
});
