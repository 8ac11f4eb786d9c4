/**
 * The standard `process_*` metrics (resident memory, CPU seconds, open file
 * descriptors, start time) and `runner_build_info`, read at scrape time.
 *
 * @module
 */

import process from "node:process";
import { labelText } from "./histogram.ts";

/** When this process started, in seconds since the epoch. */
const START_TIME_SECONDS = performance.timeOrigin / 1000;

/**
 * Open file descriptors, from Linux's `/proc/<pid>/fd`; undefined elsewhere.
 * Listed by `ls` because Deno reads `/proc/self` only with `--allow-all`.
 */
async function openFds(): Promise<number | undefined> {
  if (Deno.build.os !== "linux") return undefined;
  try {
    const { success, stdout } = await new Deno.Command("ls", {
      args: ["-1", `/proc/${Deno.pid}/fd`],
      stdin: "null",
      stdout: "piped",
      stderr: "null",
    }).output();
    if (!success) return undefined;
    return new TextDecoder().decode(stdout).split("\n").filter(Boolean).length;
  } catch {
    return undefined;
  }
}

function gauge(name: string, help: string, value: number): string[] {
  return [`# HELP ${name} ${help}`, `# TYPE ${name} gauge`, `${name} ${value}`];
}

/** The `process_*` and `runner_build_info` exposition lines. */
export async function processMetricLines(version: string): Promise<string[]> {
  const cpu = process.cpuUsage();
  const fds = await openFds();
  return [
    "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.",
    "# TYPE process_cpu_seconds_total counter",
    `process_cpu_seconds_total ${(cpu.user + cpu.system) / 1e6}`,
    ...gauge(
      "process_resident_memory_bytes",
      "Resident memory size in bytes.",
      Deno.memoryUsage().rss,
    ),
    ...(fds === undefined
      ? []
      : gauge("process_open_fds", "Number of open file descriptors.", fds)),
    ...gauge(
      "process_start_time_seconds",
      "Start time of the process since unix epoch in seconds.",
      Math.round(START_TIME_SECONDS * 1000) / 1000,
    ),
    "# HELP runner_build_info The runner's version (always 1).",
    "# TYPE runner_build_info gauge",
    `runner_build_info${labelText({ version })} 1`,
  ];
}
