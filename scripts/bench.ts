/**
 * `deno task bench [--short] [--only GROUP,…]`: what the runner costs on each
 * path, as ratios against a bare ACP client (`scripts/bench_bare_client.ts`)
 * measured in the same run on the same machine, with the same hand-written
 * agent (`scripts/bench_agent.ts`), and how its cost grows (the curves:
 * answer size, stored runs, idle daemons on a hub, concurrent runs, a warm
 * second message; `scripts/bench_curves.ts`, `scripts/bench_listing.ts`,
 * `scripts/bench_warm.ts`). It prints Markdown tables, each row against its
 * target (pass/miss); the last full results live in `docs/performance.md`.
 * The bench's exit status ignores the targets: `--short` (tiny sizes, one
 * round) only proves the bench works, and a test runs it. Groups for
 * `--only`: `paths`, `sizes`, `listing`, `hub`, `concurrent`, `warm`, `acp`
 * (the `/acp` stream path against the ACP SDK's client on the agent's own
 * stdio; `scripts/bench_acp.ts`), and two parts of `paths` alone: `stream`
 * (`runner run`'s long answer against the bare client) and `cold` (the short
 * cold prompts).
 *
 * @module
 */

import { parseArgs } from "node:util";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import { quoteCommand } from "../lib/agent/shell_words.ts";
import {
  agentCommand,
  type BenchRow,
  type BenchSizes,
  measureCommand,
  medianUsage,
  preciseCpu,
  ROOT,
  runnerCommand,
  type Usage,
} from "./bench_measure.ts";
import { curlClient } from "./bench_serve.ts";
import { benchSecondMessage } from "./bench_warm.ts";
import { benchListing } from "./bench_listing.ts";
import { benchAcpStream } from "./bench_acp.ts";
import {
  benchConcurrentFirstDelta,
  benchHubDaemons,
  benchStreamSizes,
  type CurveRow,
  curvesTable,
} from "./bench_curves.ts";
import {
  benchConcurrentRuns,
  benchDaemon,
  benchN8n,
  benchServeStreams,
} from "./bench_paths.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: { short: { type: "boolean" }, only: { type: "string" } },
});

const GROUPS = [
  "paths",
  "sizes",
  "listing",
  "hub",
  "concurrent",
  "warm",
  "acp",
];
/** Parts of `paths` that `--only` can also name alone. */
const PATH_PARTS = ["stream", "cold"];
const only = values.only?.split(",").map((group) => group.trim()) ?? GROUPS;
for (const group of only) {
  if (!GROUPS.includes(group) && !PATH_PARTS.includes(group)) {
    console.error(
      `bench: unknown group ${group} in --only; groups: ${
        [...GROUPS, ...PATH_PARTS].join(", ")
      }`,
    );
    Deno.exit(2);
  }
}
const selected = (group: string) =>
  only.includes(group) ||
  (PATH_PARTS.includes(group) && only.includes("paths"));

const SIZES: BenchSizes = values.short
  ? {
    chunks: 2000,
    rounds: 1,
    coldRounds: 1,
    concurrent: 4,
    n8nBytes: 64_000,
    n8nSlowChunks: 100,
  }
  : {
    chunks: 100_000,
    rounds: 5,
    coldRounds: 7,
    concurrent: 200,
    n8nBytes: 900_000,
    n8nSlowChunks: 4000,
  };

const work = Deno.makeTempDirSync({ prefix: "runner-bench-" });
const workspace = join(work, "ws");
Deno.mkdirSync(workspace);
const report = join(work, "agent-report.json");

/** One measured command's work: the answer, the rounds, the agent's start-up. */
interface Job {
  /** Chunks in the answer. */
  chunks: number;
  /** Rounds to take the median of. */
  rounds: number;
  /** The agent's own start-up time, ms. */
  startMs?: number;
  /** More flags for `runner run`. */
  extra?: string[];
}

/** The bare client's usage for `job`. */
async function bare(job: Job): Promise<Usage> {
  const { chunks, startMs } = job;
  const usages: Usage[] = [];
  for (let i = 0; i < job.rounds; i++) {
    usages.push(
      await measureCommand([
        Deno.execPath(),
        "run",
        "--allow-run",
        "--allow-read",
        `${ROOT}scripts/bench_bare_client.ts`,
        ...agentCommand({ chunks, startMs, report }),
      ], { agentReport: report }),
    );
  }
  return medianUsage(usages);
}

/** `runner run`'s usage for `job`. */
async function runnerRun(job: Job): Promise<Usage> {
  const { chunks, startMs } = job;
  const usages: Usage[] = [];
  for (let i = 0; i < job.rounds; i++) {
    usages.push(
      await measureCommand(
        runnerCommand(
          "run",
          "custom",
          "--workspace",
          workspace,
          "--data-dir",
          join(work, "run-data"),
          "--acp-command",
          quoteCommand(agentCommand({ chunks, startMs, report })),
          ...job.extra ?? [],
          "bench",
        ),
        { agentReport: report },
      ),
    );
  }
  return medianUsage(usages);
}

/** `runner --version`'s wall time. */
async function version(rounds: number): Promise<Usage> {
  const usages: Usage[] = [];
  for (let i = 0; i < rounds; i++) {
    usages.push(await measureCommand(runnerCommand("--version")));
  }
  return medianUsage(usages);
}

async function paths(): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  const { chunks, rounds } = SIZES;
  const baseline = selected("stream") || selected("paths")
    ? await bare({ chunks, rounds })
    : undefined;
  if (selected("stream")) {
    rows.push({
      path: `runner run, ${chunks}×32 B`,
      runner: await runnerRun({ chunks, rounds }),
      bare: baseline,
      targets: { cpu: 1.3, wall: 1.1, rssMib: 70 },
    });
  }
  if (selected("paths")) {
    const context = { work, workspace, sizes: SIZES, baseline: baseline! };
    rows.push(...await benchServeStreams(context));
    rows.push(await benchDaemon(context));
  }
  if (selected("cold")) rows.push(...await coldRows());
  if (selected("paths")) {
    const context = { work, workspace, sizes: SIZES, baseline: baseline! };
    rows.push({
      path: "runner --version",
      runner: await version(SIZES.coldRounds),
      targets: { wallMs: 150 },
    });
    rows.push(await benchConcurrentRuns(context));
    rows.push(...await benchN8n(context));
  }
  return rows;
}

/** The short cold prompts: the bench agent as it is, and one that takes 300 ms to start. */
async function coldRows(): Promise<BenchRow[]> {
  const rounds = SIZES.coldRounds;
  const cold = { chunks: 1, rounds };
  const bareCold = await bare(cold);
  const slow = { chunks: 1, rounds, startMs: values.short ? 50 : 300 };
  return [
    {
      path: "runner run, one short cold prompt",
      runner: await runnerRun(cold),
      bare: bareCold,
      targets: { cpu: 1.5, wall: 1.3 },
    },
    {
      path: "runner run, one short cold prompt, --late-update-ms 0",
      runner: await runnerRun({ ...cold, extra: ["--late-update-ms", "0"] }),
      bare: bareCold,
      note: "without any wait for straggling updates",
    },
    {
      path:
        `runner run, one short cold prompt, the agent takes ${slow.startMs} ms to start`,
      runner: await runnerRun(slow),
      bare: await bare(slow),
      note: "the runner's start-up hides behind the agent's",
    },
  ];
}

async function curves(rows: BenchRow[]): Promise<CurveRow[]> {
  const context = {
    work,
    workspace,
    rounds: values.short ? 1 : 3,
    short: values.short ?? false,
  };
  const found: CurveRow[] = [];
  if (selected("sizes")) found.push(await benchStreamSizes(context));
  if (selected("listing")) {
    const listing = await benchListing(work, values.short ? 20 : 200);
    rows.push(listing.row);
    found.push(...listing.curves);
  }
  if (selected("hub")) found.push(...await benchHubDaemons(context));
  if (selected("concurrent")) {
    found.push(...await benchConcurrentFirstDelta(context));
  }
  return found;
}

/** The targets of `row` a Markdown cell: each with pass or miss. */
function targetCell(row: BenchRow): string {
  const { targets, runner, bare } = row;
  if (!targets) return "";
  const parts: string[] = [];
  const check = (name: string, value: number, limit: number, unit: string) =>
    parts.push(
      `${name} ≤ ${limit}${unit}: ${value <= limit ? "pass" : "miss"}`,
    );
  if (targets.cpu && bare) {
    check("CPU", runner.cpuMs / bare.cpuMs, targets.cpu, "×");
  }
  if (targets.wall && bare) {
    check("wall", runner.wallMs / bare.wallMs, targets.wall, "×");
  }
  if (targets.rssMib) {
    check("RSS", runner.peakRssMib, targets.rssMib, " MiB");
  }
  if (targets.wallMs) check("wall", runner.wallMs, targets.wallMs, " ms");
  return parts.join(", ");
}

function ratio(runner: number, bare: number | undefined): string {
  return bare ? `${(runner / bare).toFixed(2)}×` : "";
}

function cell(value: number, digits: number): string {
  return value.toFixed(digits);
}

/** The results as a Markdown table. */
function table(rows: BenchRow[]): string {
  const lines = [
    "| path | CPU s (bare) | CPU ratio | wall s (bare) | wall ratio | peak RSS MiB (bare) | RSS ratio | bytes received (text) | bytes ratio | target | note |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
  ];
  for (const row of rows) {
    const { runner, bare } = row;
    const pair = (a: number, b: number | undefined, digits: number) =>
      b === undefined
        ? cell(a, digits)
        : `${cell(a, digits)} (${cell(b, digits)})`;
    lines.push(
      `| ${row.path} | ${
        pair(runner.cpuMs / 1000, bare && bare.cpuMs / 1000, 2)
      } | ${ratio(runner.cpuMs, bare?.cpuMs)} | ${
        pair(runner.wallMs / 1000, bare && bare.wallMs / 1000, 2)
      } | ${ratio(runner.wallMs, bare?.wallMs)} | ${
        pair(runner.peakRssMib, bare?.peakRssMib, 0)
      } | ${ratio(runner.peakRssMib, bare?.peakRssMib)} | ${
        row.bytes === undefined ? "" : `${row.bytes} (${row.textBytes ?? ""})`
      } | ${
        row.bytes !== undefined && row.textBytes
          ? ratio(row.bytes, row.textBytes)
          : ""
      } | ${targetCell(row)} | ${row.note ?? ""} |`,
    );
  }
  return lines.join("\n");
}

try {
  const started = performance.now();
  console.log(
    `runner bench${
      values.short ? " (short)" : ""
    }: ${availableParallelism()} cores, ${Deno.build.os}/${Deno.build.arch}, Deno ${Deno.version.deno}; CPU from ${
      preciseCpu() ? "/usr/bin/time" : "/proc polling"
    }; stream client ${curlClient() ? "curl" : "fetch (CPU not counted)"}\n`,
  );
  // Each table as soon as it is measured: a late failure keeps the rest.
  const rows = selected("stream") || selected("cold") ? await paths() : [];
  if (rows.length) console.log(table(rows) + "\n");
  if (selected("acp")) {
    const acpRows = await benchAcpStream({
      work,
      workspace,
      chunks: SIZES.chunks,
      rounds: SIZES.rounds,
    });
    console.log(
      "/acp against the ACP SDK's client on the agent's own stdio (bare):\n\n" +
        table(acpRows) + "\n",
    );
  }
  const listed = rows.length;
  const curveRows = await curves(rows);
  if (rows.length > listed) console.log(table(rows.slice(listed)) + "\n");
  if (curveRows.length) console.log(curvesTable(curveRows) + "\n");
  if (selected("warm")) {
    console.log(
      await benchSecondMessage(
        values.short ? 1 : 3,
        values.short ? 100 : 1000,
      ),
    );
  }
  console.log(
    `\nbench time: ${((performance.now() - started) / 1000).toFixed(1)} s`,
  );
} finally {
  Deno.removeSync(work, { recursive: true });
}
