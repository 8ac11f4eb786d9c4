/**
 * The curves of `deno task bench`: how the runner's cost grows with the
 * answer's size, with concurrent runs on one `runner serve`, and with idle
 * daemons on one hub — each as a ratio within one bench run, printed against
 * its target. (The store-size curve is `scripts/bench_listing.ts`.)
 *
 * @module
 */

import { join } from "node:path";
import { quoteCommand } from "../lib/agent/shell_words.ts";
import { RELAY_PROTOCOL } from "../lib/relay.ts";
import {
  agentCommand,
  measureCommand,
  median,
  processCpuMs,
  runnerCommand,
} from "./bench_measure.ts";
import { BENCH_AUTH, BENCH_DAEMON_TOKEN, startServe } from "./bench_serve.ts";

/** One line of the curves table. */
export interface CurveRow {
  /** What grows, and what is measured. */
  curve: string;
  /** The measured points. */
  points: string;
  /** The ratio (or value) the target is about. */
  value: number;
  /** How the value is shown (`×`, ` KiB`…). */
  unit: string;
  /** The largest value that meets the target. */
  limit: number;
}

/** What the curves need from the bench. */
export interface CurveContext {
  /** A scratch directory. */
  work: string;
  /** The agents' workspace. */
  workspace: string;
  /** Rounds per measurement (the median is used). */
  rounds: number;
  /** Tiny sizes (`--short`). */
  short: boolean;
}

const MB = 1_000_000;

/** `runner run`'s CPU (agent excluded) for an answer of `bytes` in 32-byte chunks. */
async function runCpuMs(context: CurveContext, bytes: number): Promise<number> {
  const report = join(context.work, "curve-agent-report.json");
  const cpu: number[] = [];
  for (let i = 0; i < context.rounds; i++) {
    const used = await measureCommand(
      runnerCommand(
        "run",
        "custom",
        "--workspace",
        context.workspace,
        "--data-dir",
        join(context.work, "curve-data"),
        "--acp-command",
        quoteCommand(agentCommand({ chunks: Math.ceil(bytes / 32), report })),
        "bench",
      ),
      { agentReport: report },
    );
    cpu.push(used.cpuMs);
  }
  return median(cpu);
}

function sizeName(bytes: number): string {
  return bytes >= MB ? `${bytes / MB} MB` : `${bytes / 1000} KB`;
}

/**
 * Stream cost vs answer size: CPU per MB of `runner run` past the smallest
 * answer (which stands for the fixed cost of a run), largest against middle.
 */
export async function benchStreamSizes(
  context: CurveContext,
): Promise<CurveRow> {
  const sizes = context.short
    ? [10_000, 100_000, 1_000_000]
    : [10_000, 1_000_000, 10_000_000];
  const cpu: number[] = [];
  for (const bytes of sizes) cpu.push(await runCpuMs(context, bytes));
  const perMb = (index: number) =>
    (cpu[index] - cpu[0]) / ((sizes[index] - sizes[0]) / MB);
  return {
    curve: `runner run, answer size (32 B chunks): CPU per MB, ${
      sizeName(sizes[2])
    } ÷ ${sizeName(sizes[1])}`,
    points: `CPU ${
      sizes.map((bytes, i) => `${sizeName(bytes)} ${cpu[i].toFixed(0)} ms`)
        .join(", ")
    }; per MB past ${sizeName(sizes[0])}: ${perMb(1).toFixed(1)} ms, ${
      perMb(2).toFixed(1)
    } ms`,
    value: perMb(2) / perMb(1),
    unit: "×",
    limit: 1.2,
  };
}

let lastFailure = "";

/** Milliseconds from POSTing each of `count` runs at once to its first `message.delta`. */
async function firstDeltas(
  url: string,
  config: Record<string, unknown>,
  count: number,
): Promise<number[]> {
  return await Promise.all(
    Array.from({ length: count }, async () => {
      const started = performance.now();
      const response = await fetch(`${url}/v1/runs`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "text/event-stream",
          ...BENCH_AUTH,
        },
        body: JSON.stringify({ input: { text: "bench" }, config }),
      });
      let first = -1;
      let tail = "";
      for await (
        const text of response.body!.pipeThrough(new TextDecoderStream())
      ) {
        if (first < 0) {
          tail = (tail + text).slice(-200);
          if (tail.includes("message.delta")) {
            first = performance.now() - started;
          }
        }
      }
      // A run that failed (e.g. its agent's start timed out on a loaded
      // machine) has no first delta; the row counts it.
      if (first < 0) lastFailure = tail.slice(-160);
      return first < 0 ? NaN : first;
    }),
  );
}

/** Concurrent runs on one `runner serve`: p50 time to first delta at each count, against the first. */
export async function benchConcurrentFirstDelta(
  context: CurveContext,
): Promise<CurveRow[]> {
  const counts = context.short ? [2, 4, 8] : [10, 100, 200];
  const serve = await startServe({
    dataDir: join(context.work, "concurrent-ttfd"),
    args: ["--max-concurrent-runs", String(counts.at(-1)! + 8)],
  });
  try {
    const config = {
      provider: "custom",
      "acp-command": quoteCommand(agentCommand({ chunks: 100 })),
      workspace: context.workspace,
    };
    const p50: number[] = [];
    let failed = 0;
    for (const count of counts) {
      const times = await firstDeltas(serve.url, config, count);
      const delivered = times.filter((time) => !Number.isNaN(time));
      failed += times.length - delivered.length;
      p50.push(median(delivered));
    }
    const failures = failed
      ? `; ${failed} runs sent no delta (last: ${JSON.stringify(lastFailure)})`
      : "";
    return counts.slice(1).map((count, i) => ({
      curve: `${count} vs ${
        counts[0]
      } concurrent runs on runner serve: p50 time to first delta`,
      points: `p50 ${counts[0]}: ${p50[0].toFixed(0)} ms, ${count}: ${
        p50[i + 1].toFixed(0)
      } ms (each run starts its own agent)${failures}`,
      value: p50[i + 1] / p50[0],
      unit: "×",
      // No worse than linear: the n-th run waits for the agents started before it.
      limit: count / counts[0],
    }));
  } finally {
    await serve.stop();
  }
}

/** The current (not peak) resident set of `pid`, in KiB. */
function rssKib(pid: number): number {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0);
}

/**
 * Opens one idle daemon connection: `daemon.hello` with the bench token,
 * then a `daemon.ping` every 20 s as `runner daemon` sends (the first one
 * at a random point of the interval, so that a short window sees its share).
 */
async function idleDaemon(hubUrl: string, id: string): Promise<WebSocket> {
  const ws = new WebSocket(hubUrl);
  await new Promise<void>((resolve, reject) => {
    ws.onopen = () =>
      ws.send(JSON.stringify({
        type: "daemon.hello",
        daemon_id: id,
        protocol: RELAY_PROTOCOL,
        token: BENCH_DAEMON_TOKEN,
        metadata: { platform: "linux", capabilities: [] },
      }));
    ws.onmessage = (message) => {
      const frame = JSON.parse(String(message.data));
      if (frame.type === "daemon.ready") resolve();
    };
    ws.onerror = () => reject(new Error(`daemon ${id} could not connect`));
    ws.onclose = (event) =>
      reject(new Error(`daemon ${id} refused: ${event.reason}`));
  });
  const ping = () => {
    if (ws.readyState === WebSocket.OPEN) {
      ws.send(JSON.stringify({ type: "daemon.ping" }));
    }
  };
  const timer = setTimeout(function again() {
    ping();
    pings.set(ws, setTimeout(again, 20_000));
  }, Math.random() * 20_000);
  pings.set(ws, timer);
  return ws;
}

const pings = new Map<WebSocket, ReturnType<typeof setTimeout>>();

/**
 * Idle daemons on one hub (`runner serve --daemon-enabled`): its resident
 * set per daemon and its CPU per minute while they only keep alive, at each
 * count (`--daemon-max-connected` raised to the largest count).
 */
export async function benchHubDaemons(
  context: CurveContext,
): Promise<CurveRow[]> {
  const counts = context.short ? [2, 8] : [10, 100, 1000];
  // 20 s: one keep-alive round, so each daemon pings exactly once per window.
  const windowMs = context.short ? 500 : 20_000;
  const serve = await startServe({
    dataDir: join(context.work, "hub-idle"),
    hub: true,
    args: ["--daemon-max-connected", String(counts.at(-1))],
  });
  const sockets: WebSocket[] = [];
  try {
    await new Promise((resolve) => setTimeout(resolve, windowMs));
    const baseRss = rssKib(serve.pid);
    // The serve's own idle work (timers, the lease, the store) without any
    // daemon: what each point adds beyond it is the daemons' cost.
    const baseStart = processCpuMs(serve.pid) ?? 0;
    await new Promise((resolve) => setTimeout(resolve, windowMs));
    const baseCpuMin = ((processCpuMs(serve.pid) ?? 0) - baseStart) * 60_000 /
      windowMs;
    const points: Array<{ count: number; kib: number; cpuMin: number }> = [];
    for (const count of counts) {
      while (sockets.length < count) {
        sockets.push(
          await idleDaemon(serve.hubUrl!, `bench-idle-${sockets.length}`),
        );
      }
      const before = processCpuMs(serve.pid) ?? 0;
      await new Promise((resolve) => setTimeout(resolve, windowMs));
      const cpu = (processCpuMs(serve.pid) ?? 0) - before;
      points.push({
        count,
        kib: (rssKib(serve.pid) - baseRss) / count,
        cpuMin: cpu * 60_000 / windowMs - baseCpuMin,
      });
    }
    const shown = points.map((p) =>
      `${p.count}: ${p.kib.toFixed(0)} KiB/daemon, ${
        p.cpuMin.toFixed(0)
      } ms CPU/min`
    ).join("; ") + ` (beyond the serve's own ${baseCpuMin.toFixed(0)} ms/min)`;
    const last = points.at(-1)!;
    return [{
      curve:
        `idle daemons on one hub (keep-alive, 20 s pings): RSS per daemon at ${last.count}`,
      points: shown,
      value: last.kib,
      unit: " KiB",
      limit: 256,
    }, {
      curve: `the same: idle CPU per minute per 100 daemons at ${last.count}`,
      points: `window ${
        windowMs / 1000
      } s, scaled to a minute, beyond the serve's own idle CPU`,
      value: last.cpuMin * 100 / last.count,
      unit: " ms",
      limit: 100,
    }];
  } finally {
    for (const ws of sockets) {
      clearTimeout(pings.get(ws));
      ws.close();
    }
    pings.clear();
    await serve.stop();
  }
}

/** The curves as a Markdown table, each against its target. */
export function curvesTable(rows: CurveRow[]): string {
  const lines = [
    "| curve | points | measured | target | met |",
    "| --- | --- | --- | --- | --- |",
  ];
  for (const row of rows) {
    const digits = row.unit === "×" ? 2 : 0;
    lines.push(
      `| ${row.curve} | ${row.points} | ${
        row.value.toFixed(digits)
      }${row.unit} | ≤ ${row.limit.toFixed(digits)}${row.unit} | ${
        row.value <= row.limit ? "pass" : "miss"
      } |`,
    );
  }
  return lines.join("\n");
}
