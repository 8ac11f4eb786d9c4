/**
 * Prometheus metrics of `runner serve`: active and finished runs, live agent
 * processes, time to first output and the gap between streamed chunks.
 *
 * @module
 */

import type { RunEvent } from "../events.ts";
import { isTerminalEvent } from "../events.ts";
import type { ReaperRegistry } from "../agent/reaper.ts";

const BUCKETS = [
  0.005,
  0.01,
  0.025,
  0.05,
  0.1,
  0.25,
  0.5,
  1,
  2.5,
  5,
  10,
  30,
  60,
  120,
];

class Histogram {
  counts = BUCKETS.map(() => 0);
  sum = 0;
  count = 0;

  observe(seconds: number) {
    this.sum += seconds;
    this.count++;
    BUCKETS.forEach((bound, index) => {
      if (seconds <= bound) this.counts[index]++;
    });
  }

  render(name: string, help: string): string[] {
    return [
      `# HELP ${name} ${help}`,
      `# TYPE ${name} histogram`,
      ...BUCKETS.map((bound, index) =>
        `${name}_bucket{le="${bound}"} ${this.counts[index]}`
      ),
      `${name}_bucket{le="+Inf"} ${this.count}`,
      `${name}_sum ${this.sum}`,
      `${name}_count ${this.count}`,
    ];
  }
}

/** Daemon hub gauges for `/metrics`. */
export interface DaemonGauges {
  /** Connected daemons. */
  connected: number;
  /** Fenced daemon ids. */
  fenced: number;
  /** Jobs running on daemons. */
  activeJobs: number;
}

/** Collects the service's metrics. */
export interface Metrics {
  /** Follows one run's events from its start. */
  trackRun(
    subscribe: (listener: (event: RunEvent) => void) => () => void,
  ): void;
  /** Wraps a reaper registry so live agent process groups are counted. */
  countAgents(registry: ReaperRegistry): ReaperRegistry;
  /** The Prometheus text exposition; `activeRuns` is read at scrape time. */
  render(activeRuns: number, daemons?: DaemonGauges): string;
}

function label(value: string): string {
  return value.replaceAll("\\", "\\\\").replaceAll('"', '\\"').replaceAll(
    "\n",
    "\\n",
  );
}

/** The `runner_runs_finished_total` labels of a run's terminal event. */
function finishedLabels(event: RunEvent): string {
  const status = event.type === "run.completed"
    ? "completed"
    : event.data.code === "run.cancelled"
    ? "cancelled"
    : "failed";
  const code = event.type === "run.completed"
    ? ""
    : String(event.data.code ?? "");
  return `status="${status}",code="${label(code)}"`;
}

/** The exposition lines of the daemon hub gauges. */
function daemonLines(daemons: DaemonGauges): string[] {
  return [
    "# HELP runner_daemons_connected Daemons connected to the hub.",
    "# TYPE runner_daemons_connected gauge",
    `runner_daemons_connected ${daemons.connected}`,
    "# HELP runner_daemons_fenced Daemon ids fenced until an operator unfences them.",
    "# TYPE runner_daemons_fenced gauge",
    `runner_daemons_fenced ${daemons.fenced}`,
    "# HELP runner_daemon_jobs_active Jobs running on daemons.",
    "# TYPE runner_daemon_jobs_active gauge",
    `runner_daemon_jobs_active ${daemons.activeJobs}`,
  ];
}

/** Makes an empty {@linkcode Metrics}. */
export function createMetrics(): Metrics {
  const finished = new Map<string, number>();
  const firstEvent = new Histogram();
  const chunkGap = new Histogram();
  let agentsAlive = 0;

  return {
    trackRun(subscribe) {
      const startedAt = performance.now();
      let lastOutputAt: number | undefined;
      const unsubscribe = subscribe((event) => {
        const now = performance.now();
        if (
          event.type === "message.delta" || event.type === "message.completed"
        ) {
          if (lastOutputAt === undefined) {
            firstEvent.observe((now - startedAt) / 1000);
          } else if (event.type === "message.delta") {
            chunkGap.observe((now - lastOutputAt) / 1000);
          }
          lastOutputAt = now;
        }
        if (isTerminalEvent(event)) {
          const key = finishedLabels(event);
          finished.set(key, (finished.get(key) ?? 0) + 1);
          unsubscribe();
        }
      });
    },
    countAgents(registry) {
      return {
        register(pgid) {
          const registration = registry.register(pgid);
          agentsAlive++;
          let released = false;
          return {
            release() {
              if (!released) agentsAlive--;
              released = true;
              registration.release();
            },
          };
        },
      };
    },
    render(activeRuns, daemons) {
      const lines = [
        "# HELP runner_runs_active Runs in progress.",
        "# TYPE runner_runs_active gauge",
        `runner_runs_active ${activeRuns}`,
        "# HELP runner_runs_finished_total Runs finished, by outcome and failure code.",
        "# TYPE runner_runs_finished_total counter",
        ...[...finished].map(([key, count]) =>
          `runner_runs_finished_total{${key}} ${count}`
        ),
        "# HELP runner_agent_processes_alive Agent process groups started and not yet torn down.",
        "# TYPE runner_agent_processes_alive gauge",
        `runner_agent_processes_alive ${agentsAlive}`,
        ...firstEvent.render(
          "runner_time_to_first_event_seconds",
          "Time from a run's start to its first agent output event.",
        ),
        ...chunkGap.render(
          "runner_chunk_latency_seconds",
          "Time between consecutive message.delta events of a run.",
        ),
      ];
      if (daemons) lines.push(...daemonLines(daemons));
      return lines.join("\n") + "\n";
    },
  };
}
