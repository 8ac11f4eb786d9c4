/**
 * `GET /v1/runs?limit=50` on `runner serve` over a store of 1 000 runs and
 * one of 100 000 (written directly as rows): what the listing costs as the
 * store grows. Every listing reads only the runs it returns (an index in
 * listing order), so the target is a latency ratio of at most 2×.
 *
 * @module
 */

import { join } from "node:path";
import { openStore, STORE_FILE_NAME } from "../lib/store/open.ts";
import { median, type Usage, watchProcess } from "./bench_measure.ts";
import { startServe } from "./bench_serve.ts";
import { insertRunRows } from "./bulk_runs.ts";
import type { BenchRow } from "./bench_measure.ts";

const SMALL_STORE = 1_000;
const LARGE_STORE = 100_000;
const WARM_UP_REQUESTS = 5;

/** A listing's cost on a store of `runs` runs: totals over `requests`, and the median latency. */
async function listingUsage(
  work: string,
  runs: number,
  requests: number,
): Promise<{ usage: Usage; medianMs: number }> {
  const dataDir = join(work, `listing-${runs}`);
  await (await openStore({ dataDir })).close();
  insertRunRows({ path: join(dataDir, STORE_FILE_NAME), count: runs });
  const serve = await startServe({
    dataDir,
    args: ["--retain-runs", "0", "--retain-runs-days", "0"],
  });
  const watch = watchProcess(serve.pid);
  try {
    const url = `${serve.url}/v1/runs?limit=50`;
    for (let index = 0; index < WARM_UP_REQUESTS; index++) {
      await (await fetch(url)).arrayBuffer();
    }
    watch.reset();
    const times: number[] = [];
    let bytes = 0;
    for (let index = 0; index < requests; index++) {
      const started = performance.now();
      bytes += (await (await fetch(url)).arrayBuffer()).byteLength;
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
  } finally {
    watch.stop();
    await serve.stop();
  }
}

/** The bench row: `requests` listings on the large store against the small one. */
export async function benchListing(
  work: string,
  requests: number,
): Promise<BenchRow> {
  const small = await listingUsage(work, SMALL_STORE, requests);
  const large = await listingUsage(work, LARGE_STORE, requests);
  const ratio = large.medianMs / small.medianMs;
  return {
    path:
      `GET /v1/runs?limit=50, ${LARGE_STORE} vs ${SMALL_STORE} runs stored, ${requests} requests`,
    runner: large.usage,
    bare: small.usage,
    note: `median latency ${large.medianMs.toFixed(1)} ms vs ${
      small.medianMs.toFixed(1)
    } ms: ${
      ratio.toFixed(2)
    }× (target ≤ 2×); the bare column is the ${SMALL_STORE}-run store`,
  };
}
