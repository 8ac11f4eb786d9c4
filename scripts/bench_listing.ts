/**
 * `GET /v1/runs?limit=50`, and one run's events (`GET /v1/runs/:id/events`),
 * on `runner serve` over a store of 1 000 runs and one of 100 000 (written
 * directly as rows): what reading costs as the store grows. Every listing
 * reads only the runs it returns (an index in listing order) and a run's
 * events are read by their key, so the target is a latency ratio of at most
 * 2×.
 *
 * @module
 */

import { join } from "node:path";
import { openStore, STORE_FILE_NAME } from "../lib/store/open.ts";
import { median, type Usage, watchProcess } from "./bench_measure.ts";
import { BENCH_AUTH, startServe } from "./bench_serve.ts";
import { insertEventRows, insertRunRows } from "./bulk_runs.ts";
import type { CurveRow } from "./bench_curves.ts";
import type { BenchRow } from "./bench_measure.ts";

const SMALL_STORE = 1_000;
const LARGE_STORE = 100_000;
const WARM_UP_REQUESTS = 5;
const EVENTS_PER_RUN = 50;

/** Median latency of `requests` GETs of `url` (after a warm-up), and their totals. */
async function timeRequests(
  url: string,
  requests: number,
  watch: ReturnType<typeof watchProcess>,
): Promise<{ usage: Usage; medianMs: number }> {
  for (let index = 0; index < WARM_UP_REQUESTS; index++) {
    await (await fetch(url, { headers: BENCH_AUTH })).arrayBuffer();
  }
  watch.reset();
  const times: number[] = [];
  let bytes = 0;
  for (let index = 0; index < requests; index++) {
    const started = performance.now();
    const response = await fetch(url, { headers: BENCH_AUTH });
    if (!response.ok) throw new Error(`GET ${url}: ${response.status}`);
    bytes += (await response.arrayBuffer()).byteLength;
    times.push(performance.now() - started);
  }
  return {
    usage: {
      wallMs: times.reduce((sum, time) => sum + time, 0),
      cpuMs: watch.cpuMs(),
      peakRssMib: watch.peakRssMib(),
      stdoutBytes: bytes,
    },
    medianMs: median(times),
  };
}

/** A store of `runs` runs: the listing's cost and one run's events' (medians over `requests`). */
async function readingUsage(
  work: string,
  runs: number,
  requests: number,
): Promise<{ listing: { usage: Usage; medianMs: number }; eventsMs: number }> {
  const dataDir = join(work, `listing-${runs}`);
  await (await openStore({ dataDir })).close();
  const path = join(dataDir, STORE_FILE_NAME);
  insertRunRows({ path, count: runs });
  // A run in the middle of the store.
  const runId = `bulk-${String(Math.floor(runs / 2)).padStart(7, "0")}`;
  insertEventRows({ path, runId, count: EVENTS_PER_RUN });
  const serve = await startServe({
    dataDir,
    args: ["--retain-runs", "0", "--retain-runs-days", "0"],
  });
  const watch = watchProcess(serve.pid);
  try {
    const listing = await timeRequests(
      `${serve.url}/v1/runs?limit=50`,
      requests,
      watch,
    );
    const events = await timeRequests(
      `${serve.url}/v1/runs/${runId}/events?stream=false`,
      requests,
      watch,
    );
    return { listing, eventsMs: events.medianMs };
  } finally {
    watch.stop();
    await serve.stop();
  }
}

/** The bench row and curves: `requests` reads on the large store against the small one. */
export async function benchListing(
  work: string,
  requests: number,
): Promise<{ row: BenchRow; curves: CurveRow[] }> {
  const small = await readingUsage(work, SMALL_STORE, requests);
  const large = await readingUsage(work, LARGE_STORE, requests);
  const ratio = large.listing.medianMs / small.listing.medianMs;
  const stores = `${LARGE_STORE} vs ${SMALL_STORE} runs stored`;
  return {
    row: {
      path: `GET /v1/runs?limit=50, ${stores}, ${requests} requests`,
      runner: large.listing.usage,
      bare: small.listing.usage,
      note: `median latency ${large.listing.medianMs.toFixed(1)} ms vs ${
        small.listing.medianMs.toFixed(1)
      } ms: ${
        ratio.toFixed(2)
      }× (target ≤ 2×); the bare column is the ${SMALL_STORE}-run store`,
    },
    curves: [{
      curve: `GET /v1/runs?limit=50, ${stores}: median latency`,
      points: `${small.listing.medianMs.toFixed(1)} ms, ${
        large.listing.medianMs.toFixed(1)
      } ms`,
      value: ratio,
      unit: "×",
      limit: 2,
    }, {
      curve:
        `GET /v1/runs/:id/events (${EVENTS_PER_RUN} events), ${stores}: median latency`,
      points: `${small.eventsMs.toFixed(1)} ms, ${
        large.eventsMs.toFixed(1)
      } ms`,
      value: large.eventsMs / small.eventsMs,
      unit: "×",
      limit: 2,
    }],
  };
}
