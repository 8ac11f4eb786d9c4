/**
 * The benchmark's agent: a minimal ACP agent written by hand (no SDK), so
 * that the agent itself costs almost nothing and the measured time is the
 * client's. It answers `initialize`, `session/new` and `session/prompt`; a
 * prompt is answered with `--chunks` text chunks of `--chunk-bytes` bytes,
 * written in large batches, optionally `--chunk-delay-ms` apart (then one
 * chunk per write, like a token-by-token agent). `--start-ms` makes it take
 * that long to start, as a real agent does (it reads nothing until then:
 * the client's start-up can hide behind it). With `--report FILE` it
 * writes its own CPU time there after each prompt, so the bench can tell the
 * agent's share from the client's.
 *
 * ```sh
 * deno run scripts/bench_agent.ts --chunks 100000 --chunk-bytes 32
 * ```
 *
 * @module
 */

import process from "node:process";
import { parseArgs } from "node:util";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    chunks: { type: "string", default: "1" },
    "chunk-bytes": { type: "string", default: "32" },
    "chunk-delay-ms": { type: "string", default: "0" },
    "start-ms": { type: "string", default: "0" },
    report: { type: "string" },
  },
});
const CHUNKS = Number(values.chunks);
const CHUNK_BYTES = Number(values["chunk-bytes"]);
const DELAY_MS = Number(values["chunk-delay-ms"]);
const SESSION_ID = "bench-session";
const encoder = new TextEncoder();
const out = Deno.stdout.writable.getWriter();

/** Chunk `i`: ASCII, `CHUNK_BYTES` long, every fourth one ending a line. */
function chunkText(i: number): string {
  const body = `${i}:` + "abcdefghijklmnopqrstuvwxyz0123456789".repeat(
    Math.ceil(CHUNK_BYTES / 36) + 1,
  );
  return i % 4 === 3
    ? body.slice(0, CHUNK_BYTES - 1) + "\n"
    : body.slice(0, CHUNK_BYTES);
}

function line(message: unknown): string {
  return JSON.stringify(message) + "\n";
}

function chunkLine(i: number): string {
  return line({
    jsonrpc: "2.0",
    method: "session/update",
    params: {
      sessionId: SESSION_ID,
      update: {
        sessionUpdate: "agent_message_chunk",
        content: { type: "text", text: chunkText(i) },
      },
    },
  });
}

async function answerPrompt(id: unknown): Promise<void> {
  if (DELAY_MS > 0) {
    for (let i = 0; i < CHUNKS; i++) {
      if (i) await new Promise((resolve) => setTimeout(resolve, DELAY_MS));
      await out.write(encoder.encode(chunkLine(i)));
    }
  } else {
    let batch = "";
    for (let i = 0; i < CHUNKS; i++) {
      batch += chunkLine(i);
      if (batch.length > 256 * 1024) {
        await out.write(encoder.encode(batch));
        batch = "";
      }
    }
    if (batch) await out.write(encoder.encode(batch));
  }
  if (values.report) {
    const { user, system } = process.cpuUsage();
    Deno.writeTextFileSync(
      values.report,
      JSON.stringify({ cpu_ms: (user + system) / 1000 }),
    );
  }
  await out.write(
    encoder.encode(
      line({ jsonrpc: "2.0", id, result: { stopReason: "end_turn" } }),
    ),
  );
}

function answer(message: { id?: unknown; method?: string }): string | null {
  const reply = (result: unknown) =>
    line({ jsonrpc: "2.0", id: message.id, result });
  switch (message.method) {
    case "initialize":
      return reply({
        protocolVersion: 1,
        agentCapabilities: { loadSession: false },
        authMethods: [],
        agentInfo: { name: "bench-agent", version: "1.0.0" },
      });
    case "session/new":
      return reply({ sessionId: SESSION_ID });
    default:
      if (message.id === undefined) return null;
      return line({
        jsonrpc: "2.0",
        id: message.id,
        error: { code: -32601, message: "Method not found" },
      });
  }
}

const START_MS = Number(values["start-ms"]);
if (START_MS > 0) await new Promise((resolve) => setTimeout(resolve, START_MS));

let buffered = "";
for await (
  const text of Deno.stdin.readable.pipeThrough(new TextDecoderStream())
) {
  buffered += text;
  let end: number;
  while ((end = buffered.indexOf("\n")) >= 0) {
    const raw = buffered.slice(0, end).trim();
    buffered = buffered.slice(end + 1);
    if (!raw) continue;
    const message = JSON.parse(raw);
    if (message.method === "session/prompt") {
      await answerPrompt(message.id);
      continue;
    }
    const reply = answer(message);
    if (reply) await out.write(encoder.encode(reply));
  }
}
