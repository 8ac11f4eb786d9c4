/**
 * Retention of `runner serve`: a timer that deletes finished runs (and their
 * events) older than `--retain-runs-days` or past the newest `--retain-runs`,
 * in small batches with a turn of the event loop between them, so requests
 * are answered while it works. Active runs — and with them pending
 * permission requests — and the conversations' session mappings are never
 * deleted. See `docs/runs.md`, "Retention".
 *
 * @module
 */

import { toRunnerError } from "../errors.ts";
import type { Logger } from "../log.ts";
import type { PrunedRuns, RunStore } from "../store/types.ts";
import type { Metrics } from "./metrics.ts";

/** How often a retention pass runs (the first one right after start). */
export const RETENTION_INTERVAL_MS = 10 * 60_000;

/** Runs deleted per batch (one transaction). */
export const PRUNE_BATCH_RUNS = 100;

const DAY_MS = 86_400_000;

/** What `runner serve` keeps (`--retain-runs-days`, `--retain-runs`). */
export interface RetentionSettings {
  /** Finished runs started more than this many days ago are deleted; 0 keeps them. */
  maxAgeDays: number;
  /** Finished runs past the newest this many are deleted; 0: no limit. */
  maxRuns: number;
}

/** Options of {@linkcode startRetention}. */
export interface RetentionOptions {
  /** The store to prune. */
  store: RunStore;
  /** What to keep. */
  settings: RetentionSettings;
  /** Where passes are counted (`runner_store_pruned_rows_total`, …). */
  metrics?: Pick<Metrics, "observePrune">;
  /** Structured log. */
  log: Logger;
  /** Between passes, in ms (default {@linkcode RETENTION_INTERVAL_MS}). */
  intervalMs?: number;
  /** Runs per batch (default {@linkcode PRUNE_BATCH_RUNS}). */
  batchRuns?: number;
}

/** A running retention timer. */
export interface Retention {
  /** Runs a pass now (after the one under way, if any); resolves to what it deleted. */
  pass(): Promise<PrunedRuns>;
  /** Stops the timer; resolves once a pass under way has finished its batch. */
  stop(): Promise<void>;
}

/** Whether the settings delete anything at all. */
export function retentionEnabled(settings: RetentionSettings): boolean {
  return settings.maxAgeDays > 0 || settings.maxRuns > 0;
}

/** Starts the timer: a pass at once, then every `intervalMs`. */
export function startRetention(options: RetentionOptions): Retention {
  const { store, settings, log } = options;
  const batchRuns = options.batchRuns ?? PRUNE_BATCH_RUNS;
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let running: Promise<PrunedRuns> = Promise.resolve({ runs: 0, events: 0 });

  async function prunePass(): Promise<PrunedRuns> {
    const started = performance.now();
    const total: PrunedRuns = { runs: 0, events: 0 };
    if (!retentionEnabled(settings)) return total;
    const rule = {
      createdBefore: settings.maxAgeDays > 0
        ? Date.now() - settings.maxAgeDays * DAY_MS
        : undefined,
      keepNewest: settings.maxRuns > 0 ? settings.maxRuns : undefined,
    };
    try {
      while (!stopped) {
        const batch = await store.pruneRuns({ ...rule, limit: batchRuns });
        total.runs += batch.runs;
        total.events += batch.events;
        if (batch.runs < batchRuns) break;
        // The embedded store works synchronously: let requests in between batches.
        await new Promise((resolve) => setTimeout(resolve, 0));
      }
    } catch (error) {
      const failure = toRunnerError(error);
      log({
        msg: "pruning old runs failed; retrying at the next pass",
        level: "warn",
        code: failure.code,
        error: failure.message,
      });
    }
    const seconds = (performance.now() - started) / 1000;
    options.metrics?.observePrune({ ...total, seconds });
    if (total.runs) {
      log({
        msg: "pruned old runs",
        runs: total.runs,
        events: total.events,
        ms: Math.round(seconds * 1000),
      });
    }
    return total;
  }

  function pass(): Promise<PrunedRuns> {
    running = running.then(prunePass);
    return running;
  }

  function schedule(delayMs: number): void {
    if (stopped) return;
    timer = setTimeout(async () => {
      await pass();
      schedule(options.intervalMs ?? RETENTION_INTERVAL_MS);
    }, delayMs);
  }

  if (retentionEnabled(settings)) schedule(0);
  return {
    pass,
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
