/**
 * The kill -9 probe of `runner serve` (`serve_crash_test.ts` on SQLite,
 * `serve_crash_postgres_test.ts` on PostgreSQL): a client streams a fast run
 * (one delta per chunk) over SSE, the server is killed after a random number
 * of received events, restarted on the same data directory (and store), and
 * the restarted server must hold every event the client received, under the
 * same sequence with the same data, end the run with a terminal event after
 * all of them, and end a resume (`Last-Event-ID`) with exactly one terminal
 * event; the run's agent must not outlive the crash (the restart reaps it).
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import type { RunEvent } from "../lib/events.ts";
import {
  apiFetch,
  fixtureConfig,
  postJson,
  processAlive,
  readSse,
  type ServeProcess,
  terminals,
} from "./serve_test_helpers.ts";

/** Chunks of 32 bytes in the streamed reply (one delta each). */
const CHUNKS = 4000;

/** What one try saw before and after the crash. */
interface CrashTry {
  /** The run id. */
  runId: string;
  /** The events the client received before the connection broke. */
  seen: RunEvent[];
  /** The agent's pid. */
  agentPid: number;
}

/** The fixture agent's pid from its pid file, once written. */
async function agentPid(pidFile: string): Promise<number> {
  return JSON.parse(await Deno.readTextFile(pidFile)).agent_pid;
}

/** Streams a fast run and kills the server once `killAt` deltas arrived; reads what was already on its way. */
async function streamAndKill(
  serve: ServeProcess,
  options: { workspace: string; pidFile: string; killAt: number },
): Promise<CrashTry> {
  const response = await postJson(`${serve.url}/v1/runs`, {
    input: { text: "go" },
    config: {
      ...fixtureConfig(options.workspace, [
        "--chunks",
        String(CHUNKS),
        "--chunk-bytes",
        "32",
        "--pid-file",
        options.pidFile,
      ]),
      "delta-coalesce-ms": 0,
    },
  });
  assert.equal(response.status, 200);
  const runId = response.headers.get("x-run-id")!;
  const seen: RunEvent[] = [];
  let deltas = 0;
  let killed = false;
  try {
    for await (const message of readSse(response.body!)) {
      seen.push(JSON.parse(message.data));
      // Counting deltas: the agent is up (its pid file written) by the first.
      if (message.event === "message.delta") deltas++;
      if (!killed && deltas >= options.killAt) {
        serve.child.kill("SIGKILL");
        killed = true;
      }
    }
  } catch {
    // The connection broke with the server: what arrived before counts.
  }
  if (!killed) serve.child.kill("SIGKILL");
  await serve.stop("SIGKILL");
  return { runId, seen, agentPid: await agentPid(options.pidFile) };
}

/** Checks the restarted server against what the client saw. */
async function checkAfterRestart(
  serve: ServeProcess,
  { runId, seen, agentPid }: CrashTry,
  label: string,
): Promise<void> {
  assert.ok(!processAlive(agentPid), `${label}: the agent outlived the crash`);
  const answer = await apiFetch(
    `${serve.url}/v1/runs/${runId}/events?stream=false`,
  );
  const stored: RunEvent[] = (await answer.json()).events;
  const bySequence = new Map(stored.map((event) => [event.sequence, event]));
  for (const event of seen) {
    assert.deepEqual(
      bySequence.get(event.sequence),
      event,
      `${label}: event ${event.sequence} the client saw is not stored as seen`,
    );
  }
  const ends = terminals(stored);
  assert.equal(ends.length, 1, `${label}: stored terminal events`);
  assert.equal(stored.at(-1), ends[0]);
  const lastSeen = seen.at(-1)?.sequence ?? 0;
  const sawEnd = terminals(seen).length > 0;
  if (!sawEnd) {
    assert.ok(
      ends[0].sequence! > lastSeen,
      `${label}: the terminal event ${
        ends[0].sequence
      } is not after the last seen ${lastSeen}`,
    );
  }

  const resumed = await apiFetch(`${serve.url}/v1/runs/${runId}/events`, {
    headers: { "last-event-id": String(lastSeen) },
  });
  if (sawEnd) {
    assert.equal(resumed.status, 204, `${label}: resume after the end`);
    return;
  }
  const rest: RunEvent[] = [];
  for await (const message of readSse(resumed.body!)) {
    rest.push(JSON.parse(message.data));
  }
  assert.ok(
    rest.every((event) => event.sequence! > lastSeen),
    `${label}: the resume repeated events`,
  );
  assert.equal(terminals(rest).length, 1, `${label}: resumed terminal events`);
  assert.equal(rest.at(-1), terminals(rest)[0]);
}

/** Options for {@linkcode crashTries}. */
export interface CrashTriesOptions {
  /** A scratch directory (data directories, pid files, the workspace). */
  dir: string;
  /** How many kills (each on a fresh data directory, or store). */
  tries: number;
  /** Starts `runner serve` on try `index`'s data directory (again after the kill). */
  start(dataDir: string, index: number): Promise<ServeProcess>;
}

/**
 * Runs the probe `tries` times; resolves to how many kills interrupted the
 * run (the client saw no terminal event).
 */
export async function crashTries(options: CrashTriesOptions): Promise<number> {
  const { dir } = options;
  const agents: number[] = [];
  let interrupted = 0;
  try {
    for (let index = 0; index < options.tries; index++) {
      const dataDir = join(dir, `data-${index}`);
      // Within the run's first half, so the kill most likely interrupts it.
      const killAt = 1 + Math.floor(Math.random() * CHUNKS / 2);
      const label = `try ${index + 1}, kill after ${killAt} deltas`;
      const first = await options.start(dataDir, index);
      let crash: CrashTry;
      try {
        crash = await streamAndKill(first, {
          workspace: join(dir, "ws"),
          pidFile: join(dir, `pids-${index}.json`),
          killAt,
        });
      } finally {
        await first.stop("SIGKILL");
      }
      agents.push(crash.agentPid);
      if (!terminals(crash.seen).length) interrupted++;
      const second = await options.start(dataDir, index);
      try {
        await checkAfterRestart(second, crash, label);
      } finally {
        await second.stop("SIGTERM");
      }
    }
  } finally {
    // Only if a check failed before the restart reaped them.
    for (const pid of agents) {
      if (processAlive(pid)) Deno.kill(pid, "SIGKILL");
    }
  }
  return interrupted;
}
