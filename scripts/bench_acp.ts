/**
 * The `/acp` stream path of `deno task bench`: one answer of many
 * `session/update` chunks from the bench agent, read by the ACP SDK's own
 * client (`scripts/bench_acp_client.ts`) (a) from the agent's stdio, which
 * the client spawns (the baseline), and through `runner serve`'s `/acp` over
 * (b) Streamable HTTP and (c) WebSocket, whose operator target is the same
 * agent. CPU is the client's plus, for `/acp`, the server's (user + system
 * from `/proc/<pid>/stat`), never the agent's; the time to the first update
 * counts from the client's start of `initialize`. Ratios are against (a)
 * measured in the same run.
 *
 * @module
 */

import { join } from "node:path";
import { quoteCommand } from "../lib/agent/shell_words.ts";
import {
  agentCommand,
  type BenchRow,
  measureCommand,
  median,
  medianUsage,
  ROOT,
  type Usage,
  watchProcess,
} from "./bench_measure.ts";
import { BENCH_API_TOKEN, startServe } from "./bench_serve.ts";

/** What the `/acp` bench needs. */
export interface AcpBenchContext {
  /** A scratch directory. */
  work: string;
  /** The agents' workspace. */
  workspace: string;
  /** Chunks in the answer (32 bytes each). */
  chunks: number;
  /** Rounds to take the medians of. */
  rounds: number;
}

/** One client round: what it used and when its first update came. */
interface ClientRound {
  usage: Usage;
  firstUpdateMs: number;
  /** How many text chunks the client got (the agent's, joined where they waited together). */
  messages: number;
}

/** The client's command line, after `deno run`. */
function clientCommand(args: string[]): string[] {
  return [
    Deno.execPath(),
    "run",
    "-A",
    "--config",
    `${ROOT}deno.json`,
    `${ROOT}scripts/bench_acp_client.ts`,
    ...args,
  ];
}

/** Runs the client once with `args`; fails unless the whole answer came. */
async function clientRound(
  context: AcpBenchContext,
  args: string[],
  agentReport?: string,
): Promise<ClientRound> {
  const resultFile = join(context.work, "acp-client-result.json");
  const usage = await measureCommand(clientCommand(args), {
    agentReport,
    env: { BENCH_ACP_RESULT: resultFile },
  });
  const result = JSON.parse(Deno.readTextFileSync(resultFile));
  if (result.text_bytes !== context.chunks * 32) {
    throw new Error(
      `the /acp bench client got ${result.text_bytes} bytes of ${
        context.chunks * 32
      }`,
    );
  }
  return {
    usage,
    firstUpdateMs: result.first_update_ms,
    messages: result.chunks,
  };
}

/** The medians of several rounds. */
function medianRound(rounds: ClientRound[]): ClientRound {
  return {
    usage: medianUsage(rounds.map((round) => round.usage)),
    firstUpdateMs: median(rounds.map((round) => round.firstUpdateMs)),
    messages: median(rounds.map((round) => round.messages)),
  };
}

/** The SDK client on the agent's own stdio, `/acp` over Streamable HTTP and over WebSocket. */
export async function benchAcpStream(
  context: AcpBenchContext,
): Promise<BenchRow[]> {
  const { chunks, rounds } = context;
  const report = join(context.work, "acp-agent-report.json");
  const bare: ClientRound[] = [];
  for (let i = 0; i < rounds; i++) {
    bare.push(
      await clientRound(
        context,
        ["stdio", ...agentCommand({ chunks, report })],
        report,
      ),
    );
  }
  const baseline = medianRound(bare);
  const serve = await startServe({
    dataDir: join(context.work, "acp-serve"),
    args: [
      "--provider",
      "custom",
      "--acp-command",
      quoteCommand(agentCommand({ chunks })),
      "--workspace",
      context.workspace,
    ],
  });
  const watch = watchProcess(serve.pid);
  const rows: BenchRow[] = [];
  try {
    for (
      const [name, profile] of [
        ["Streamable HTTP", "http"],
        ["WebSocket", "websocket"],
      ] as const
    ) {
      const measured: ClientRound[] = [];
      const serverCpu: number[] = [];
      for (let i = 0; i < rounds; i++) {
        watch.reset();
        const round = await clientRound(context, [
          profile,
          `${serve.url}/acp`,
          BENCH_API_TOKEN,
        ]);
        serverCpu.push(watch.cpuMs());
        measured.push({
          ...round,
          usage: {
            ...round.usage,
            cpuMs: round.usage.cpuMs + serverCpu.at(-1)!,
          },
        });
      }
      const { usage, firstUpdateMs, messages } = medianRound(measured);
      rows.push({
        path: `/acp ${name}, SDK client, ${chunks}×32 B`,
        runner: { ...usage, peakRssMib: watch.peakRssMib() },
        bare: baseline.usage,
        note: `CPU: serve ${(median(serverCpu) / 1000).toFixed(2)} s (${
          (median(serverCpu) / baseline.usage.cpuMs).toFixed(2)
        }× the stdio client's) + client; ${messages} text messages (stdio ${baseline.messages}); first update ${
          firstUpdateMs.toFixed(0)
        } ms (stdio ${baseline.firstUpdateMs.toFixed(0)} ms, ${
          (firstUpdateMs / baseline.firstUpdateMs).toFixed(2)
        }×)`,
        targets: { cpu: 1.2 },
      });
    }
  } finally {
    watch.stop();
    await serve.stop();
  }
  return rows;
}
