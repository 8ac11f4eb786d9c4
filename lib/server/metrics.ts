/**
 * Prometheus metrics of `runner serve`: runs (active, finished, duration,
 * time to first output, gaps between streamed chunks; by provider and
 * location), the tokens and costs agents reported, live agent processes, HTTP requests by route and status,
 * connections by listener (open, cap, closed to make room, refused, failed
 * accepts), the daemon hub, the store (size, pruning) and the `process_*`
 * metrics.
 *
 * @module
 */

import { isTerminalEvent, type RunEvent, TOKEN_KINDS } from "../events.ts";
import type { ReaperRegistry } from "../agent/reaper.ts";
import type { ListenerStats } from "../net/tcp_listener.ts";
import { Counter, Histogram, type Labels } from "./histogram.ts";
import { processMetricLines } from "./process_metrics.ts";
import { RUNNER_VERSION } from "../version.ts";

const LATENCY_BUCKETS = [
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

const RUN_BUCKETS = [1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600];

/** Daemon hub gauges for `/metrics`. */
export interface DaemonGauges {
  /** Connected daemons. */
  connected: number;
  /** Fenced daemon ids. */
  fenced: number;
  /** Jobs running on daemons. */
  activeJobs: number;
}

/** What a run's metrics are labelled with. */
export interface RunLabels {
  /** The run's provider. */
  provider: string;
  /** The run's location. */
  location: string;
}

/** One answered HTTP request. */
export interface RequestObservation {
  /** The method. */
  method: string;
  /** The route pattern (`/v1/runs/{id}`; `unmatched` for unknown paths). */
  route: string;
  /** The status. */
  status: number;
  /** Seconds until the response started. */
  seconds: number;
}

/** One retention pass, as {@linkcode Metrics.observePrune} counts it. */
export interface PruneObservation {
  /** Runs deleted. */
  runs: number;
  /** Events deleted. */
  events: number;
  /** How long the pass took, in seconds. */
  seconds: number;
}

/** Collects the service's metrics. */
export interface Metrics {
  /** Follows one run's events from its start. */
  trackRun(
    subscribe: (listener: (event: RunEvent) => void) => () => void,
    labels: RunLabels,
  ): void;
  /** Counts one HTTP request. */
  observeRequest(request: RequestObservation): void;
  /** Reports a listener's connections (`http`, `hub`), read at scrape time. */
  observeListener(name: string, stats: () => ListenerStats): void;
  /** Wraps a reaper registry so live agent process groups are counted. */
  countAgents(registry: ReaperRegistry): ReaperRegistry;
  /** Counts one retention pass (rows deleted, its duration). */
  observePrune(pass: PruneObservation): void;
  /**
   * The Prometheus text exposition; `activeRuns`, the daemon gauges and the
   * store's size (bytes) are read at scrape time.
   */
  render(
    activeRuns: number,
    daemons?: DaemonGauges,
    storeBytes?: number,
  ): Promise<string>;
}

/** The `runner_runs_finished_total` labels of a run's terminal event (no code on success). */
function finishedLabels(event: RunEvent, labels: RunLabels): Labels {
  if (event.type === "run.completed") return { status: "completed", ...labels };
  const code = String(event.data.code ?? "runner.internal");
  const status = code === "run.cancelled" ? "cancelled" : "failed";
  return { status, code, ...labels };
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

/** The metric name, help and field of each listener figure. */
const LISTENER_METRICS: [string, string, string, keyof ListenerStats][] = [
  [
    "runner_connections_open",
    "gauge",
    "Connections open now, by listener.",
    "open",
  ],
  [
    "runner_connections_max",
    "gauge",
    "The connection cap, by listener.",
    "max",
  ],
  [
    "runner_connections_evicted_total",
    "counter",
    "Idle connections (still sending their request head, or idle between requests) closed at the cap to make room for a new one, by listener.",
    "evicted",
  ],
  [
    "runner_connections_refused_total",
    "counter",
    "New connections answered 503 at the cap because every connection was busy, by listener.",
    "refused",
  ],
  [
    "runner_accept_errors_total",
    "counter",
    "Connections the listener failed to accept (e.g. out of file descriptors), by listener.",
    "acceptErrors",
  ],
];

/** The exposition lines of the listeners' connection figures. */
function listenerLines(
  listeners: Map<string, () => ListenerStats>,
): string[] {
  if (!listeners.size) return [];
  const stats = [...listeners].map(([name, read]) => [name, read()] as const);
  return LISTENER_METRICS.flatMap(([metric, type, help, field]) => [
    `# HELP ${metric} ${help}`,
    `# TYPE ${metric} ${type}`,
    ...stats.map(([name, figures]) =>
      `${metric}{listener="${name}"} ${figures[field]}`
    ),
  ]);
}

/** The run metrics: what {@linkcode Metrics.trackRun} feeds. */
interface RunMetrics {
  finished: Counter;
  duration: Histogram;
  firstEvent: Histogram;
  chunkGap: Histogram;
  /** Tokens the agents reported, by provider, model and kind. */
  tokens: Counter;
  /** Costs the agents reported, by currency. */
  cost: Counter;
}

/** Counts the usage on a run's terminal event. */
function countUsage(
  runs: RunMetrics,
  event: RunEvent,
  labels: { provider: string; model: string },
): void {
  const usage = event.usage;
  if (!usage) return;
  for (const [key, kind] of TOKEN_KINDS) {
    const value = usage[key];
    if (value !== undefined) runs.tokens.add({ ...labels, kind }, value);
  }
  if (usage.cost) {
    runs.cost.add({ currency: usage.cost.currency }, usage.cost.amount);
  }
}

function followRun(
  runs: RunMetrics,
  subscribe: (listener: (event: RunEvent) => void) => () => void,
  labels: RunLabels,
): void {
  const startedAt = performance.now();
  let lastOutputAt: number | undefined;
  // The model in force, as the session reported it; unknown until then.
  let model = "unknown";
  const unsubscribe = subscribe((event) => {
    const now = performance.now();
    if (
      event.type === "session.configured" &&
      typeof event.data.model === "string" && event.data.model
    ) model = event.data.model;
    if (event.type === "message.delta" || event.type === "message.completed") {
      if (lastOutputAt === undefined) {
        runs.firstEvent.observe((now - startedAt) / 1000, { ...labels });
      } else if (event.type === "message.delta") {
        runs.chunkGap.observe((now - lastOutputAt) / 1000, { ...labels });
      }
      lastOutputAt = now;
    }
    if (isTerminalEvent(event)) {
      runs.finished.add(finishedLabels(event, labels));
      runs.duration.observe((now - startedAt) / 1000, { ...labels });
      countUsage(runs, event, { provider: labels.provider, model });
      unsubscribe();
    }
  });
}

/** The store's metrics: rows retention deleted, its passes' durations, the size. */
function createStoreMetrics(): {
  observePrune(pass: PruneObservation): void;
  lines(storeBytes?: number): string[];
} {
  const pruned = new Counter();
  pruned.add({ table: "runs" }, 0);
  pruned.add({ table: "events" }, 0);
  const duration = new Histogram(LATENCY_BUCKETS);
  return {
    observePrune({ runs, events, seconds }) {
      pruned.add({ table: "runs" }, runs);
      pruned.add({ table: "events" }, events);
      duration.observe(seconds);
    },
    lines: (storeBytes) => [
      ...(storeBytes === undefined ? [] : [
        "# HELP runner_store_size_bytes The store's size: the SQLite file's pages, or the PostgreSQL database.",
        "# TYPE runner_store_size_bytes gauge",
        `runner_store_size_bytes ${storeBytes}`,
      ]),
      ...pruned.render(
        "runner_store_pruned_rows_total",
        "Rows deleted by retention (--retain-runs-days, --retain-runs), by table.",
      ),
      ...duration.render(
        "runner_store_prune_duration_seconds",
        "Time one retention pass took (all its batches).",
      ),
    ],
  };
}

/** A registry that also counts the groups registered and not yet released. */
function countingRegistry(
  registry: Parameters<Metrics["countAgents"]>[0],
  count: (change: number) => void,
): ReturnType<Metrics["countAgents"]> {
  return {
    register(pgid) {
      const registration = registry.register(pgid);
      count(1);
      let released = false;
      return {
        release() {
          if (!released) count(-1);
          released = true;
          registration.release();
        },
      };
    },
  };
}

/** Makes an empty {@linkcode Metrics}. */
export function createMetrics(): Metrics {
  const runs: RunMetrics = {
    finished: new Counter(),
    duration: new Histogram(RUN_BUCKETS),
    firstEvent: new Histogram(LATENCY_BUCKETS),
    chunkGap: new Histogram(LATENCY_BUCKETS),
    tokens: new Counter(),
    cost: new Counter(),
  };
  const requests = new Counter();
  const requestDuration = new Histogram(LATENCY_BUCKETS);
  const store = createStoreMetrics();
  let agentsAlive = 0;
  const listeners = new Map<string, () => ListenerStats>();

  return {
    trackRun: (subscribe, labels) => followRun(runs, subscribe, labels),
    observeRequest({ method, route, status, seconds }) {
      const labels = { method, route, status: String(status) };
      requests.add(labels);
      requestDuration.observe(seconds, labels);
    },
    observeListener(name, stats) {
      listeners.set(name, stats);
    },
    countAgents(registry) {
      return countingRegistry(registry, (change) => agentsAlive += change);
    },
    observePrune: store.observePrune,
    async render(activeRuns, daemons, storeBytes) {
      const lines = [
        "# HELP runner_runs_active Runs in progress.",
        "# TYPE runner_runs_active gauge",
        `runner_runs_active ${activeRuns}`,
        ...runs.finished.render(
          "runner_runs_finished_total",
          "Runs finished, by outcome (and failure code), provider and location.",
        ),
        ...runs.duration.render(
          "runner_run_duration_seconds",
          "Time from a run's start to its terminal event.",
        ),
        ...runs.tokens.render(
          "runner_tokens_total",
          "Tokens the agents reported (ACP PromptResponse.usage) on runs' terminal events, by provider, model (unknown when the session named none) and kind (prompt, completion, cached_read, cached_write, thought).",
        ),
        ...runs.cost.render(
          "runner_cost_total",
          "What runs cost (each what it added to its agent session's running cost), by currency.",
        ),
        "# HELP runner_agent_processes_alive Agent process groups started and not yet torn down.",
        "# TYPE runner_agent_processes_alive gauge",
        `runner_agent_processes_alive ${agentsAlive}`,
        ...runs.firstEvent.render(
          "runner_time_to_first_event_seconds",
          "Time from a run's start to its first agent output event.",
        ),
        ...runs.chunkGap.render(
          "runner_chunk_latency_seconds",
          "Time between consecutive message.delta events of a run.",
        ),
        ...requests.render(
          "runner_http_requests_total",
          "HTTP requests answered, by method, route and status.",
        ),
        ...requestDuration.render(
          "runner_http_request_duration_seconds",
          "Time until an HTTP response started (streams go on after), by method, route and status.",
        ),
        ...store.lines(storeBytes),
        ...listenerLines(listeners),
        ...await processMetricLines(RUNNER_VERSION),
      ];
      if (daemons) lines.push(...daemonLines(daemons));
      return lines.join("\n") + "\n";
    },
  };
}
