/**
 * The SQLite store file over months: pruned runs give their space back to
 * the file system (incremental vacuum; a file written before is converted
 * once when `runner serve` opens it), and a damaged file is reported as soon
 * as the store opens — `/healthz` is degraded from its first answer — not at
 * the first write that happens to touch the damage.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { insertRunRows } from "../../scripts/bulk_runs.ts";
import { openStore, STORE_FILE_NAME } from "../../lib/store/open.ts";
import type { RunStore } from "../../lib/store/types.ts";
import { tempDir } from "../helpers.ts";
import { apiFetch, startServe } from "../serve_test_helpers.ts";

/** `PRAGMA auto_vacuum` of the store file in `dataDir` (2: incremental). */
function autoVacuum(dataDir: string): number {
  const db = new DatabaseSync(join(dataDir, STORE_FILE_NAME));
  try {
    const row = db.prepare("PRAGMA auto_vacuum").get() as {
      auto_vacuum: number;
    };
    return Number(row.auto_vacuum);
  } finally {
    db.close();
  }
}

/** Prunes every finished run, batch after batch. */
async function pruneAll(store: RunStore): Promise<number> {
  let total = 0;
  for (;;) {
    const batch = await store.pruneRuns({
      createdBefore: Date.now() + 1,
      limit: 100,
    });
    total += batch.runs;
    if (batch.runs < 100) return total;
  }
}

Deno.test("pruned runs give their pages back: the store's size shrinks", async () => {
  const dataDir = tempDir("runner-store-file-");
  const store = await openStore({ dataDir });
  try {
    const text = "x".repeat(4000);
    for (let index = 0; index < 300; index++) {
      const runId = `r${index}`;
      await store.createRun({ runId, config: {}, status: "active" });
      store.appendEvent(runId, {
        run_id: "",
        type: "message.delta",
        data: { text },
      });
      store.appendEvent(runId, { run_id: "", type: "run.completed", data: {} });
      await store.finishRun(runId, { status: "completed" });
    }
    const full = await store.size();
    assert.ok(full > 300 * 4000, String(full));
    assert.equal(await pruneAll(store), 300);
    const pruned = await store.size();
    assert.ok(pruned < full / 10, `${pruned} of ${full} bytes left`);
  } finally {
    await store.close();
    await Deno.remove(dataDir, { recursive: true });
  }
});

Deno.test("a store file written without incremental vacuum is converted once, keeping its runs", async () => {
  const dataDir = tempDir("runner-store-file-");
  const logs: Record<string, unknown>[] = [];
  try {
    const first = await openStore({ dataDir });
    await first.createRun({ runId: "kept", config: {}, status: "active" });
    await first.finishRun("kept", { status: "completed" });
    await first.close();
    // As an earlier runner wrote it.
    const db = new DatabaseSync(join(dataDir, STORE_FILE_NAME));
    db.exec("PRAGMA auto_vacuum = NONE");
    db.exec("VACUUM");
    db.close();
    assert.equal(autoVacuum(dataDir), 0);

    const opened = await openStore({
      dataDir,
      reclaimSpace: true,
      log: (entry) => logs.push(entry),
    });
    assert.equal((await opened.getRun("kept"))?.status, "completed");
    await opened.close();
    assert.equal(autoVacuum(dataDir), 2);
    assert.deepEqual(logs.map((entry) => entry.msg), [
      "store file converted so pruned runs give their space back",
    ]);
    await (await openStore({
      dataDir,
      reclaimSpace: true,
      log: (entry) => logs.push(entry),
    })).close();
    assert.equal(logs.length, 1);
  } finally {
    await Deno.remove(dataDir, { recursive: true });
  }
});

/** A copy of a store file of many runs in a new data directory, with one page in its middle overwritten. */
async function damagedCopy(): Promise<string> {
  const original = tempDir("runner-store-file-");
  await (await openStore({ dataDir: original })).close();
  insertRunRows({ path: join(original, STORE_FILE_NAME), count: 5000 });
  const copy = tempDir("runner-store-file-");
  await Deno.copyFile(
    join(original, STORE_FILE_NAME),
    join(copy, STORE_FILE_NAME),
  );
  await Deno.remove(original, { recursive: true });
  const path = join(copy, STORE_FILE_NAME);
  const pageSize = 4096;
  const pages = (await Deno.stat(path)).size / pageSize;
  const file = await Deno.open(path, { write: true });
  try {
    await file.seek(Math.floor(pages / 2) * pageSize, Deno.SeekMode.Start);
    await file.write(new Uint8Array(pageSize).fill(0xa5));
  } finally {
    file.close();
  }
  return copy;
}

Deno.test("a damaged store file is reported at open: health is not ok before any write", async () => {
  const dataDir = await damagedCopy();
  const logs: Record<string, unknown>[] = [];
  try {
    // Without the check the damage goes unnoticed until something reads it.
    const unchecked = await openStore({ dataDir });
    assert.deepEqual(await unchecked.health(), { ok: true });
    await unchecked.close();

    const store = await openStore({
      dataDir,
      checkIntegrity: true,
      reclaimSpace: true,
      log: (entry) => logs.push(entry),
    });
    try {
      const health = await store.health();
      assert.equal(health.ok, false);
      assert.match(health.error!, /is damaged/);
      assert.match(health.error!, /move the file/);
      assert.deepEqual(logs.map((entry) => [entry.msg, entry.level]), [
        ["the store file is damaged", "error"],
      ]);
      // A write that lands does not make it healthy again.
      await store.putSession({
        conversationId: "c",
        provider: "p",
        location: "local",
        target: "",
        workspace: "/w",
        agentCommand: "a",
      }, "s");
      assert.equal((await store.health()).ok, false);
    } finally {
      await store.close();
    }
  } finally {
    await Deno.remove(dataDir, { recursive: true });
  }
});

Deno.test("runner serve on a damaged store file answers /healthz degraded from the start", async () => {
  const dataDir = await damagedCopy();
  const serve = await startServe({ dataDir });
  try {
    const response = await apiFetch(`${serve.url}/healthz`);
    assert.equal(response.status, 503);
    const health = await response.json();
    assert.equal(health.status, "degraded");
    assert.match(health.store.error, /is damaged/);
    const logged = await serve.waitForLog((entry) =>
      entry.msg === "the store file is damaged"
    );
    assert.equal(logged.level, "error");
  } finally {
    await serve.stop();
    await Deno.remove(dataDir, { recursive: true });
  }
});
