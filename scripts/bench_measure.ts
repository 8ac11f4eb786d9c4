/**
 * Measuring processes for `deno task bench`: CPU time, wall time and peak
 * RSS of a command (its agent's own CPU subtracted), and CPU/RSS of a
 * long-running process (`runner serve`) between two points.
 * Also the shapes the bench scripts share: a run's sizes and a results row.
 *
 * CPU of a command that exits comes from `/usr/bin/time` (its children that
 * it waited for included, hence the agent's self-reported CPU is subtracted);
 * without `/usr/bin/time`, from polling `/proc` (a little optimistic). Peak
 * RSS is the measured process's own `VmHWM`, polled from `/proc`.
 *
 * @module
 */

import { fileURLToPath } from "node:url";
import { DENO_RUN_FLAGS } from "../lib/runtime_permissions.ts";

/** The repository root. */
export const ROOT = fileURLToPath(new URL("..", import.meta.url));

/** The runner's command line (the binary's permission set). */
export function runnerCommand(...args: string[]): string[] {
  return [
    Deno.execPath(),
    "run",
    ...DENO_RUN_FLAGS,
    `${ROOT}main.ts`,
    ...args,
  ];
}

/** The bench agent's command line. */
export function agentCommand(
  options: {
    chunks: number;
    chunkBytes?: number;
    delayMs?: number;
    /** The agent's own start-up time, ms (`--start-ms`). */
    startMs?: number;
    report?: string;
  },
): string[] {
  return [
    Deno.execPath(),
    "run",
    "--allow-write",
    `${ROOT}scripts/bench_agent.ts`,
    "--chunks",
    String(options.chunks),
    "--chunk-bytes",
    String(options.chunkBytes ?? 32),
    ...(options.delayMs ? ["--chunk-delay-ms", String(options.delayMs)] : []),
    ...(options.startMs ? ["--start-ms", String(options.startMs)] : []),
    ...(options.report ? ["--report", options.report] : []),
  ];
}

/** What one measured command used. */
export interface Usage {
  /** Wall time, ms. */
  wallMs: number;
  /** CPU time (user + system), ms. */
  cpuMs: number;
  /** Peak resident set of the measured process, MiB. */
  peakRssMib: number;
  /** Bytes it wrote to stdout. */
  stdoutBytes: number;
}

const CLOCK_TICKS_PER_SECOND = 100;
const hasTime = (() => {
  try {
    return Deno.statSync("/usr/bin/time").isFile;
  } catch {
    return false;
  }
})();

/** CPU time (user + system, all threads, not children) of `pid`, in ms. */
export function processCpuMs(pid: number): number | undefined {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) * 1000 /
      CLOCK_TICKS_PER_SECOND;
  } catch {
    return undefined;
  }
}

/** Peak resident set (`VmHWM`) of `pid`, in MiB. */
export function processPeakRssMib(pid: number): number | undefined {
  try {
    const status = Deno.readTextFileSync(`/proc/${pid}/status`);
    const match = /VmHWM:\s+(\d+) kB/.exec(status);
    return match ? Number(match[1]) / 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** The first child of `pid` (the command `/usr/bin/time` started). */
function childOf(pid: number): number | undefined {
  try {
    const text = Deno.readTextFileSync(`/proc/${pid}/task/${pid}/children`);
    const first = text.trim().split(/\s+/)[0];
    return first ? Number(first) : undefined;
  } catch {
    return undefined;
  }
}

/** Options for {@linkcode measureCommand}. */
export interface MeasureOptions {
  /** A file the agent writes its own `{cpu_ms}` to; subtracted from the CPU. */
  agentReport?: string;
  /** Extra environment. */
  env?: Record<string, string>;
}

/** Runs `argv` to its end and reports what it used (its agent excluded). */
export async function measureCommand(
  argv: string[],
  options: MeasureOptions = {},
): Promise<Usage> {
  const timeFile = Deno.makeTempFileSync({ prefix: "bench-time-" });
  const wrapped = hasTime
    ? ["/usr/bin/time", "-o", timeFile, "-f", "%U %S", ...argv]
    : argv;
  const started = performance.now();
  const child = new Deno.Command(wrapped[0], {
    args: wrapped.slice(1),
    env: options.env,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let peak = 0;
  let lastCpu = 0;
  const poll = setInterval(() => {
    const pid = hasTime ? childOf(child.pid) : child.pid;
    if (pid === undefined) return;
    peak = Math.max(peak, processPeakRssMib(pid) ?? 0);
    lastCpu = processCpuMs(pid) ?? lastCpu;
  }, 5);
  let stdoutBytes = 0;
  const counting = (async () => {
    for await (const chunk of child.stdout) stdoutBytes += chunk.length;
  })();
  const stderr = new Response(child.stderr).text();
  const status = await child.status;
  const wallMs = performance.now() - started;
  clearInterval(poll);
  await counting;
  if (!status.success) {
    throw new Error(`${argv.join(" ")} failed:\n${await stderr}`);
  }
  let cpuMs = lastCpu;
  if (hasTime) {
    const [user, system] = Deno.readTextFileSync(timeFile).trim().split(/\s+/)
      .slice(-2).map(Number);
    cpuMs = (user + system) * 1000 - agentCpuMs(options.agentReport);
  }
  Deno.removeSync(timeFile);
  return { wallMs, cpuMs, peakRssMib: peak, stdoutBytes };
}

/** The CPU time the bench agent reported, in ms (0 without a report). */
export function agentCpuMs(report?: string): number {
  if (!report) return 0;
  try {
    return JSON.parse(Deno.readTextFileSync(report)).cpu_ms;
  } catch {
    return 0;
  }
}

/** Watches a running process: CPU used since {@linkcode ProcessWatch.reset}, and peak RSS. */
export interface ProcessWatch {
  /** Starts counting CPU from now. */
  reset(): void;
  /** CPU ms used since the last reset. */
  cpuMs(): number;
  /** Peak RSS so far (MiB), polled. */
  peakRssMib(): number;
  /** Stops polling. */
  stop(): void;
}

/** Starts watching `pid` (polling its peak RSS). */
export function watchProcess(pid: number): ProcessWatch {
  let base = processCpuMs(pid) ?? 0;
  let peak = processPeakRssMib(pid) ?? 0;
  const poll = setInterval(() => {
    peak = Math.max(peak, processPeakRssMib(pid) ?? 0);
  }, 10);
  return {
    reset() {
      base = processCpuMs(pid) ?? 0;
    },
    cpuMs: () => (processCpuMs(pid) ?? base) - base,
    peakRssMib: () => Math.max(peak, processPeakRssMib(pid) ?? 0),
    stop: () => clearInterval(poll),
  };
}

/** The median of `values`. */
export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2
    ? sorted[middle]
    : (sorted[middle - 1] + sorted[middle]) / 2;
}

/** Medians of each field of several usages. */
export function medianUsage(usages: Usage[]): Usage {
  return {
    wallMs: median(usages.map((u) => u.wallMs)),
    cpuMs: median(usages.map((u) => u.cpuMs)),
    peakRssMib: median(usages.map((u) => u.peakRssMib)),
    stdoutBytes: median(usages.map((u) => u.stdoutBytes)),
  };
}

/** Whether `/usr/bin/time` is there (precise CPU of commands that exit). */
export function preciseCpu(): boolean {
  return hasTime;
}

/** Sizes of one bench run. */
export interface BenchSizes {
  /** Chunks of the streaming runs (32 bytes each). */
  chunks: number;
  /** Rounds per measurement (the median is shown). */
  rounds: number;
  /** Rounds of the short cold prompt. */
  coldRounds: number;
  /** Concurrent runs on one `runner serve`. */
  concurrent: number;
  /** Bytes of the fast n8n answer. */
  n8nBytes: number;
  /** 8-byte chunks of the slow (token-by-token, 5 ms) n8n answer. */
  n8nSlowChunks: number;
}

/** One line of the results table. */
export interface BenchRow {
  /** What was measured. */
  path: string;
  /** The runner's usage. */
  runner: Usage;
  /** The bare client's usage, when there is a baseline. */
  bare?: Usage;
  /** Bytes the client received (on the wire, or stdout). */
  bytes?: number;
  /** What the bytes carry (the answer's size). */
  textBytes?: number;
  /** Anything else worth saying. */
  note?: string;
  /** The targets the row is held to. */
  targets?: RowTargets;
}

/** A row's targets: ratios against the bare client, absolute peak RSS and wall. */
export interface RowTargets {
  /** CPU ratio at most. */
  cpu?: number;
  /** Wall ratio at most. */
  wall?: number;
  /** Peak RSS at most, MiB. */
  rssMib?: number;
  /** Wall time at most, ms (no baseline). */
  wallMs?: number;
}
