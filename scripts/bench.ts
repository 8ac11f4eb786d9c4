/**
 * `deno task bench`: the runner's overhead, as ratios against a baseline
 * measured in the same run on the same machine (no absolute thresholds).
 *
 * - startup+turn: spawn the fixture agent, initialize, session/new, one
 *   prompt — with the bare SDK client (baseline) vs the run engine.
 * - streaming: 5 000 chunks through the bare SDK client vs through the engine's
 *   event pipeline (events numbered and delivered to a sink).
 * - 2nd message: time to the first chunk of a conversation's second message
 *   with the fixture taking 1 s to initialize and 1 s to load its session,
 *   cold (pool off: spawn, initialize, session/load, prompt) vs warm (the
 *   agent kept from the first message: prompt only). `docs/performance.md`.
 *
 * @module
 */

import * as acp from "@agentclientprotocol/sdk";
import { fileURLToPath } from "node:url";
import { prepareAgentLaunch } from "../lib/agent/launch.ts";
import { parseRunConfig } from "../lib/config.ts";
import { launchLocal } from "../lib/locations/local.ts";
import { startRun } from "../lib/run/engine.ts";
import { createRunManager } from "../lib/run/manager.ts";
import { createWarmPool } from "../lib/run/warm_pool.ts";
import { openStore } from "../lib/store/open.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const FIXTURE = [
  Deno.execPath(),
  "run",
  "-A",
  "--config",
  `${ROOT}deno.json`,
  `${ROOT}tests/fixtures/agent.ts`,
];
const ROUNDS = 7;

async function bareSdk(flags: string[]): Promise<number> {
  const started = performance.now();
  const child = new Deno.Command(FIXTURE[0], {
    args: [...FIXTURE.slice(1), ...flags],
    stdin: "piped",
    stdout: "piped",
    stderr: "null",
  }).spawn();
  let chunks = 0;
  const connection = acp.client({ name: "bench" })
    .onNotification(acp.methods.client.session.update, () => {
      chunks++;
    })
    .connect(acp.ndJsonStream(child.stdin, child.stdout));
  await connection.agent.request(acp.methods.agent.initialize, {
    protocolVersion: 1,
    clientCapabilities: {},
  });
  const session = await connection.agent.request(
    acp.methods.agent.session.new,
    { cwd: "/tmp", mcpServers: [] },
  );
  await connection.agent.request(acp.methods.agent.session.prompt, {
    sessionId: session.sessionId,
    prompt: [{ type: "text", text: "bench" }],
  });
  const elapsed = performance.now() - started;
  connection.close();
  child.kill("SIGTERM");
  await child.status;
  return chunks >= 0 ? elapsed : elapsed;
}

async function engine(flags: string[]): Promise<number> {
  const started = performance.now();
  const config = parseRunConfig({
    provider: "custom",
    "acp-command": [...FIXTURE, ...flags].join(" "),
    workspace: "/tmp",
    "langbot-assets-enabled": false,
    "late-update-ms": 1,
  });
  const launch = prepareAgentLaunch(config);
  let events = 0;
  const handle = startRun({
    runId: crypto.randomUUID(),
    input: { text: "bench" },
    config,
    sessionCwd: "/tmp",
    launch: () => launchLocal({ launch }),
    emit: () => events++,
  });
  const result = await handle.done;
  if (result.status !== "completed") {
    throw new Error(`bench run failed: ${result.code}`);
  }
  return performance.now() - started;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

async function compare(name: string, flags: string[]) {
  const base: number[] = [];
  const ours: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    base.push(await bareSdk(flags));
    ours.push(await engine(flags));
  }
  const b = median(base);
  const o = median(ours);
  console.log(
    `${name.padEnd(16)} baseline ${b.toFixed(1)} ms  runner ${
      o.toFixed(1)
    } ms  ratio ${(o / b).toFixed(2)}x`,
  );
}

await compare("startup+turn", ["--text", "hello"]);
await compare("streaming 5000", [
  "--text",
  "x".repeat(20000),
  "--chunks",
  "5000",
]);

/** Milliseconds from starting a conversation's second message to its first chunk. */
async function secondMessage(warm: boolean): Promise<number> {
  const dataDir = await Deno.makeTempDir({ prefix: "runner_bench_" });
  const store = openStore({ dataDir });
  const pool = createWarmPool({ idleTimeout: warm ? 60 : 0, maxAgents: 4 });
  const manager = createRunManager({ store, warmPool: pool });
  const config = parseRunConfig({
    provider: "custom",
    "acp-command": [
      ...FIXTURE,
      "--load-session",
      "--state-dir",
      `${dataDir}/sessions`,
      "--initialize-delay-ms",
      "1000",
      "--load-delay-ms",
      "1000",
    ].join(" "),
    workspace: dataDir,
    "langbot-assets-enabled": false,
    "late-update-ms": 1,
  });
  const send = async (text: string) => {
    const started = performance.now();
    let firstChunk = -1;
    const { run } = manager.start({
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
    store.close();
    await Deno.remove(dataDir, { recursive: true });
  }
}

async function compareSecondMessage() {
  const cold: number[] = [];
  const warm: number[] = [];
  for (let i = 0; i < 3; i++) {
    cold.push(await secondMessage(false));
    warm.push(await secondMessage(true));
  }
  const c = median(cold);
  const w = median(warm);
  console.log(
    `${"2nd message".padEnd(16)} first chunk cold ${c.toFixed(1)} ms  warm ${
      w.toFixed(1)
    } ms  ${(c / w).toFixed(0)}x sooner warm`,
  );
}

await compareSecondMessage();
