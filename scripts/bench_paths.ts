/**
 * The `runner serve` paths of `deno task bench`: SSE and NDJSON streams, a
 * run through `runner daemon` and the hub on loopback, many concurrent runs,
 * and the n8n stream's size against LangBot's 1 MiB cap.
 *
 * @module
 */

import { join } from "node:path";
import { quoteCommand } from "../lib/agent/shell_words.ts";
import {
  agentCommand,
  medianUsage,
  type Usage,
  watchProcess,
} from "./bench_measure.ts";
import {
  BENCH_AUTH,
  curlClient,
  startDaemon,
  startServe,
  streamRun,
} from "./bench_serve.ts";
import type { BenchRow, BenchSizes } from "./bench_measure.ts";

/** What every path gets from the bench. */
export interface BenchContext {
  /** A scratch directory. */
  work: string;
  /** The agents' workspace. */
  workspace: string;
  /** The sizes of this bench run. */
  sizes: BenchSizes;
  /** The bare client's usage for `sizes.chunks` chunks. */
  baseline: Usage;
}

/** LangBot aborts an n8n response past this many bytes. */
const LANGBOT_N8N_CAP = 1024 * 1024;

function runConfig(
  context: BenchContext,
  agent: Parameters<typeof agentCommand>[0],
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    provider: "custom",
    "acp-command": quoteCommand(agentCommand(agent)),
    workspace: context.workspace,
    ...extra,
  };
}

/** `runner serve` with an SSE client and with an NDJSON client. */
export async function benchServeStreams(
  context: BenchContext,
): Promise<BenchRow[]> {
  const { chunks, rounds } = context.sizes;
  const serve = await startServe({ dataDir: join(context.work, "serve") });
  const watch = watchProcess(serve.pid);
  const rows: BenchRow[] = [];
  const client = curlClient() ? "curl" : "fetch";
  try {
    for (
      const [name, accept, conversation] of [
        ["SSE", "text/event-stream", false],
        ["NDJSON", "application/x-ndjson", false],
        // A conversation's run: its agent may stay warm, so its streams are
        // shared (a new conversation each round: every run starts its agent).
        ["SSE, a conversation's run,", "text/event-stream", true],
      ] as const
    ) {
      const usages: Usage[] = [];
      for (let i = 0; i < rounds; i++) {
        watch.reset();
        const used = await streamRun({
          url: `${serve.url}/v1/runs`,
          body: {
            input: { text: "bench" },
            config: runConfig(context, { chunks }),
            ...(conversation ? { conversation_id: crypto.randomUUID() } : {}),
          },
          accept,
        });
        usages.push({
          ...used,
          cpuMs: used.cpuMs + watch.cpuMs(),
          peakRssMib: watch.peakRssMib(),
        });
      }
      const usage = medianUsage(usages);
      rows.push({
        path: `runner serve + ${name} client (${client}), ${chunks}×32 B`,
        runner: usage,
        bare: context.baseline,
        bytes: usage.stdoutBytes,
        textBytes: chunks * 32,
        note: "CPU: serve + client",
        targets: { cpu: 2 },
      });
    }
  } finally {
    watch.stop();
    await serve.stop();
  }
  return rows;
}

/** A run through `runner daemon` and the hub in `runner serve`, on loopback. */
export async function benchDaemon(context: BenchContext): Promise<BenchRow> {
  const { chunks, rounds } = context.sizes;
  const serve = await startServe({
    dataDir: join(context.work, "hub"),
    hub: true,
  });
  const daemon = await startDaemon({
    hubUrl: serve.hubUrl!,
    daemonId: "bench",
    dataDir: join(context.work, "daemon"),
  });
  const watches = [watchProcess(serve.pid), watchProcess(daemon.pid)];
  try {
    const usages: Usage[] = [];
    for (let i = 0; i < rounds; i++) {
      watches.forEach((watch) => watch.reset());
      const used = await streamRun({
        url: `${serve.url}/v1/runs`,
        body: {
          input: { text: "bench" },
          config: runConfig(context, { chunks }, {
            location: "daemon",
            "daemon-id": "bench",
          }),
        },
      });
      usages.push({
        ...used,
        cpuMs: used.cpuMs + watches[0].cpuMs() + watches[1].cpuMs(),
        peakRssMib: watches[0].peakRssMib() + watches[1].peakRssMib(),
      });
    }
    const usage = medianUsage(usages);
    return {
      path: `runner daemon → hub (runner serve) → SSE client, ${chunks}×32 B`,
      runner: usage,
      bare: context.baseline,
      bytes: usage.stdoutBytes,
      textBytes: chunks * 32,
      note: "CPU: serve + daemon + client; RSS: serve + daemon",
      targets: { cpu: 3 },
    };
  } finally {
    watches.forEach((watch) => watch.stop());
    await daemon.stop();
    await serve.stop();
  }
}

/** Many runs at once on one `runner serve` (the runner's RSS, agents excluded). */
export async function benchConcurrentRuns(
  context: BenchContext,
): Promise<BenchRow> {
  const { concurrent } = context.sizes;
  const serve = await startServe({
    dataDir: join(context.work, "concurrent"),
    args: ["--max-concurrent-runs", String(concurrent + 8)],
  });
  const watch = watchProcess(serve.pid);
  try {
    const started = performance.now();
    const config = runConfig(context, { chunks: 100 });
    const outcomes = await Promise.all(
      Array.from({ length: concurrent }, async () => {
        const response = await fetch(`${serve.url}/v1/runs?stream=false`, {
          method: "POST",
          headers: { "content-type": "application/json", ...BENCH_AUTH },
          body: JSON.stringify({ input: { text: "bench" }, config }),
        });
        return (await response.json()).status;
      }),
    );
    const completed = outcomes.filter((status) => status === "completed");
    return {
      path: `${concurrent} concurrent runs on runner serve`,
      runner: {
        wallMs: performance.now() - started,
        cpuMs: watch.cpuMs(),
        peakRssMib: watch.peakRssMib(),
        stdoutBytes: 0,
      },
      note:
        `${completed.length}/${concurrent} completed; RSS of runner serve only`,
      targets: { rssMib: 250 },
    };
  } finally {
    watch.stop();
    await serve.stop();
  }
}

/** The n8n stream of a fast agent and of a slow token-by-token one. */
export async function benchN8n(context: BenchContext): Promise<BenchRow[]> {
  const { n8nBytes, n8nSlowChunks } = context.sizes;
  const serve = await startServe({ dataDir: join(context.work, "n8n") });
  const watch = watchProcess(serve.pid);
  const post = async (agent: Parameters<typeof agentCommand>[0]) => {
    watch.reset();
    const query = new URLSearchParams(
      runConfig(context, agent) as Record<string, string>,
    );
    const used = await streamRun({
      url: `${serve.url}/v1/webhooks/n8n?${query}`,
      body: { chatInput: "bench", session_id: crypto.randomUUID() },
      accept: "application/json",
    });
    return {
      ...used,
      cpuMs: used.cpuMs + watch.cpuMs(),
      peakRssMib: watch.peakRssMib(),
    };
  };
  try {
    const fastChunks = Math.round(n8nBytes / 32);
    const fast = await post({ chunks: fastChunks });
    const slowText = n8nSlowChunks * 8;
    const slow = await post({
      chunks: n8nSlowChunks,
      chunkBytes: 8,
      delayMs: 5,
    });
    const projected = Math.round(slow.stdoutBytes / slowText * n8nBytes);
    return [{
      path: `n8n stream, ${fastChunks}×32 B (fast agent)`,
      runner: fast,
      bytes: fast.stdoutBytes,
      textBytes: fastChunks * 32,
      note: `LangBot cap ${LANGBOT_N8N_CAP}: ${
        fast.stdoutBytes <= LANGBOT_N8N_CAP ? "under" : "OVER"
      }`,
    }, {
      path: `n8n stream, ${n8nSlowChunks}×8 B every 5 ms (slow agent)`,
      runner: slow,
      bytes: slow.stdoutBytes,
      textBytes: slowText,
      note: `projected for ${n8nBytes} B: ${projected} B, ${
        projected <= LANGBOT_N8N_CAP ? "under" : "OVER"
      } the cap`,
    }];
  } finally {
    watch.stop();
    await serve.stop();
  }
}
