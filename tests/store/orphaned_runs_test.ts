/**
 * Runs whose owning process is gone but still looks alive to a signal-0
 * probe: a zombie (its parent never reaps it) or a pid reused by another
 * process. At start and while serving, such runs end with
 * `runner.restarted`, and a stream following one ends with that failure.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { RUNTIME_PERMISSION_FLAGS } from "../../lib/runtime_permissions.ts";
import { processIdentity } from "../../lib/agent/process_table.ts";
import { openStore } from "../../lib/store/open.ts";
import { ROOT, tempDir } from "../helpers.ts";
import { readUntilText } from "../stream_helpers.ts";
import {
  apiFetch,
  processAlive,
  readSse,
  startServe,
  terminals,
} from "../serve_test_helpers.ts";
import type { RunEvent } from "../../lib/events.ts";

const OWNER_SCRIPT = `
import { openStore } from ${JSON.stringify(`${ROOT}lib/store/open.ts`)};
const [dataDir, runId, mode] = Deno.args;
const store = await openStore({ dataDir });
await store.createRun({ runId, config: {}, status: "active" });
store.appendEvent(runId, {
  run_id: runId,
  type: "message.delta",
  data: { chunk: { type: "text", content: "partial" } },
});
await store.flush();
console.log("started");
if (mode === "hold") setInterval(() => {}, 1 << 30);
else Deno.exit(0);
`;

/** A run owner whose parent (`sleep`) never reaps it: once it exits it stays a zombie. */
interface ZombieOwner {
  /** The owner's pid. */
  pid: number;
  /** Stops the reaping-refusing parent (the zombie is then reaped by init). */
  stop(): Promise<void>;
}

/** Starts an owner process that records `runId` as active, under a parent that never waits. */
async function startOwner(
  dataDir: string,
  runId: string,
  mode: "exit" | "hold",
): Promise<ZombieOwner> {
  const script = join(tempDir(), "owner.ts");
  await Deno.writeTextFile(script, OWNER_SCRIPT);
  const deno = [Deno.execPath(), "run", ...RUNTIME_PERMISSION_FLAGS, script]
    .map((word) => `'${word}'`).join(" ");
  const parent = new Deno.Command("sh", {
    args: [
      "-c",
      `${deno} '${dataDir}' '${runId}' ${mode} & echo "$!"; exec sleep 1000`,
    ],
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const lines = parent.stdout.pipeThrough(new TextDecoderStream()).getReader();
  const text = await readUntilText(
    lines,
    "started",
    "the owner did not start",
  );
  await lines.cancel();
  return {
    pid: Number(text.trim().split("\n")[0]),
    async stop() {
      parent.kill("SIGKILL");
      await parent.status;
    },
  };
}

/** Whether `pid` is a zombie (exited, not yet reaped). */
function isZombie(pid: number): boolean {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0] === "Z";
  } catch {
    return false;
  }
}

/** Waits until the owner has exited and is a zombie (it exits on its own). */
async function untilZombie(pid: number): Promise<void> {
  while (!isZombie(pid)) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

Deno.test("a restart while the dead owner is still a zombie fails its run as runner.restarted", async () => {
  const dataDir = tempDir();
  const owner = await startOwner(dataDir, "zombie-run", "exit");
  try {
    await untilZombie(owner.pid);
    const serve = await startServe({ dataDir });
    try {
      const run = await (await apiFetch(`${serve.url}/v1/runs/zombie-run`))
        .json();
      assert.equal(run.status, "failed");
      assert.equal(run.code, "runner.restarted");
      assert.deepEqual(run.events.map((e: RunEvent) => e.type), [
        "message.delta",
        "run.failed",
      ]);
    } finally {
      await serve.stop();
    }
  } finally {
    await owner.stop();
  }
});

Deno.test("while serving, a stream following a run whose owner died ends with runner.restarted", async () => {
  const dataDir = tempDir();
  const serve = await startServe({ dataDir });
  const owner = await startOwner(dataDir, "dying-run", "hold");
  try {
    const response = await apiFetch(`${serve.url}/v1/runs/dying-run/events`, {
      // A bound so a stream that never ends fails the test instead of hanging it.
      signal: AbortSignal.timeout(30_000),
    });
    const messages = readSse(response.body!);
    const first = await messages.next();
    assert.equal(JSON.parse(first.value!.data).type, "message.delta");
    Deno.kill(owner.pid, "SIGKILL");
    await untilZombie(owner.pid);
    const events: RunEvent[] = [];
    for await (const message of messages) events.push(JSON.parse(message.data));
    assert.deepEqual(terminals(events).map((e) => e.data.code), [
      "runner.restarted",
    ]);
    const cancelled = await (await apiFetch(
      `${serve.url}/v1/runs/dying-run/cancel`,
      { method: "POST" },
    )).json();
    assert.deepEqual([cancelled.status, cancelled.code], [
      "failed",
      "runner.restarted",
    ]);
  } finally {
    await owner.stop();
    await serve.stop();
  }
});

Deno.test("a run whose owner pid now belongs to another process is ended; its true owner's is not", async () => {
  const dataDir = tempDir();
  const other = new Deno.Command("sleep", { args: ["1000"] }).spawn();
  try {
    const writer = await openStore({ dataDir });
    await writer.createRun({ runId: "reused", config: {}, status: "active" });
    await writer.createRun({ runId: "owned", config: {}, status: "active" });
    await writer.close();
    // Both runs now name the live `sleep`: one with its real start time, one
    // with the start time of an earlier process that had the same pid.
    const db = new DatabaseSync(join(dataDir, "runner.db"));
    const update = db.prepare(
      "UPDATE runs SET owner_pid = ?, owner_start_time = ? WHERE run_id = ?",
    );
    update.run(other.pid, processIdentity(other.pid).startTime!, "owned");
    update.run(other.pid, "1", "reused");
    db.close();
    assert.ok(processAlive(other.pid));

    const store = await openStore({ dataDir });
    try {
      assert.deepEqual(
        await store.markActiveRunsFailed("runner.restarted", "gone"),
        ["reused"],
      );
      assert.equal((await store.getRun("owned"))?.status, "active");
      assert.equal((await store.getRun("reused"))?.code, "runner.restarted");
    } finally {
      await store.close();
    }
  } finally {
    other.kill("SIGKILL");
    await other.status;
  }
});
