/**
 * The bench's warm-agent row: time from sending a conversation's second
 * message to its first chunk, cold (pool off: spawn, initialize,
 * session/load, prompt) vs warm (the agent kept from the first message:
 * prompt only), with the fixture agent taking `delayMs` to initialize and
 * again to load its session. See `docs/performance.md`, "Warm agents".
 *
 * @module
 */

import { runnerLocations } from "../lib/locations/runner_locations.ts";
import { fileURLToPath } from "node:url";
import { parseRunConfig } from "../lib/config.ts";
import { createRunManager } from "../lib/run/manager.ts";
import { createWarmPool } from "../lib/run/warm/pool.ts";
import { openStore } from "../lib/store/open.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

/** Milliseconds from starting a conversation's second message to its first chunk. */
async function secondMessage(warm: boolean, delayMs: number): Promise<number> {
  const dataDir = await Deno.makeTempDir({ prefix: "runner-bench-warm-" });
  const store = await openStore({ dataDir });
  const pool = createWarmPool({ idleTimeout: warm ? 60 : 0, maxAgents: 4 });
  const manager = createRunManager({
    locations: runnerLocations(),
    store,
    warmPool: pool,
  });
  const config = parseRunConfig({
    provider: "custom",
    "acp-command": [
      Deno.execPath(),
      "run",
      "-A",
      "--config",
      `${ROOT}deno.json`,
      `${ROOT}tests/fixtures/agent.ts`,
      "--load-session",
      "--state-dir",
      `${dataDir}/sessions`,
      "--initialize-delay-ms",
      String(delayMs),
      "--load-delay-ms",
      String(delayMs),
    ].join(" "),
    workspace: dataDir,
    "langbot-assets-enabled": false,
    "late-update-ms": 1,
  });
  const send = async (text: string) => {
    const started = performance.now();
    let firstChunk = -1;
    const { run } = await manager.start({
      conversationId: "bench",
      input: { text },
      config,
    });
    run.subscribe((event) => {
      if (event.type === "message.delta" && firstChunk < 0) {
        firstChunk = performance.now() - started;
      }
    });
    const result = await run.done;
    if (result.status !== "completed") {
      throw new Error(`bench run failed: ${result.code}`);
    }
    return firstChunk;
  };
  try {
    await send("one");
    return await send("two");
  } finally {
    await pool.close();
    await store.close();
    await Deno.remove(dataDir, { recursive: true });
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

/** The warm-vs-cold line of the bench; `rounds` of each, medians compared. */
export async function benchSecondMessage(
  rounds: number,
  delayMs: number,
): Promise<string> {
  const cold: number[] = [];
  const warm: number[] = [];
  for (let i = 0; i < rounds; i++) {
    cold.push(await secondMessage(false, delayMs));
    warm.push(await secondMessage(true, delayMs));
  }
  const c = median(cold);
  const w = median(warm);
  return `2nd message of a conversation, first chunk (fixture: ${delayMs} ms initialize + ${delayMs} ms load): cold ${
    c.toFixed(1)
  } ms, warm ${w.toFixed(1)} ms, ${
    (c / w).toFixed(0)
  }× sooner warm (target ≥ 10×: ${c / w >= 10 ? "pass" : "miss"})`;
}
