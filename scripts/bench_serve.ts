/**
 * `runner serve` and `runner daemon` for `deno task bench`: started as the
 * binary would run, on 127.0.0.1, and clients that drive them (curl when it
 * is installed, so that the client costs what a small native client costs).
 *
 * @module
 */

import { join } from "node:path";
import { measureCommand, runnerCommand, type Usage } from "./bench_measure.ts";

/** A running runner process with its log. */
export interface RunnerProcess {
  /** Its process id. */
  pid: number;
  /** Resolves with the first JSON log line (or stderr text) `match` accepts. */
  waitFor(match: (line: string) => boolean): Promise<string>;
  /** SIGTERM, then waits for the exit. */
  stop(): Promise<void>;
}

/** Starts `runner <args>` and collects its output lines. */
export function startRunner(args: string[]): RunnerProcess {
  const argv = runnerCommand(...args);
  const child = new Deno.Command(argv[0], {
    args: argv.slice(1),
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const lines: string[] = [];
  let wake: (() => void) | undefined;
  let ended = 0;
  const pump = async (stream: ReadableStream<Uint8Array>) => {
    let partial = "";
    for await (const text of stream.pipeThrough(new TextDecoderStream())) {
      partial += text;
      const parts = partial.split("\n");
      partial = parts.pop()!;
      lines.push(...parts);
      wake?.();
    }
    ended++;
    wake?.();
  };
  const pumped = Promise.all([pump(child.stdout), pump(child.stderr)]);
  return {
    pid: child.pid,
    async waitFor(match) {
      for (;;) {
        const found = lines.find(match);
        if (found !== undefined) return found;
        if (ended === 2) {
          throw new Error(`runner ${args[0]} exited:\n${lines.join("\n")}`);
        }
        await new Promise<void>((resolve) => wake = resolve);
      }
    },
    async stop() {
      try {
        child.kill("SIGTERM");
      } catch { /* gone */ }
      await child.status;
      await pumped;
    },
  };
}

/** A started `runner serve` and its URLs. */
export interface Serve extends RunnerProcess {
  /** `http://127.0.0.1:<port>`. */
  url: string;
  /** The daemon hub's `ws://` URL, when enabled. */
  hubUrl?: string;
}

/** The API token of the bench's servers (long, varied, never published). */
export const BENCH_API_TOKEN = crypto.randomUUID() + crypto.randomUUID();

/** The header the bench's clients send: the servers want the token on loopback too. */
export const BENCH_AUTH: Readonly<Record<string, string>> = {
  authorization: `Bearer ${BENCH_API_TOKEN}`,
};

/** A daemon token for the bench only (long, varied, never published). */
export const BENCH_DAEMON_TOKEN = crypto.randomUUID() + crypto.randomUUID();

/** Starts `runner serve` on a free port (with its daemon hub if asked). */
export async function startServe(
  options: { dataDir: string; hub?: boolean; args?: string[] },
): Promise<Serve> {
  const serve = startRunner([
    "serve",
    "--port",
    "0",
    "--data-dir",
    options.dataDir,
    "--allow-custom-commands",
    "--api-token",
    BENCH_API_TOKEN,
    ...(options.hub
      ? [
        "--daemon-enabled",
        "--daemon-port",
        "0",
        "--daemon-token",
        BENCH_DAEMON_TOKEN,
      ]
      : []),
    ...(options.args ?? []),
  ]);
  const urlOf = (line: string) => String(JSON.parse(line).url);
  const isLog = (msg: string) => (line: string) => {
    try {
      return JSON.parse(line).msg === msg;
    } catch {
      return false;
    }
  };
  const url = urlOf(await serve.waitFor(isLog("listening")));
  const hubUrl = options.hub
    ? urlOf(await serve.waitFor(isLog("daemon hub listening")))
    : undefined;
  return { ...serve, url, hubUrl };
}

/** Starts `runner daemon` against `hubUrl` and waits until it is connected. */
export async function startDaemon(
  options: { hubUrl: string; daemonId: string; dataDir: string },
): Promise<RunnerProcess> {
  const tokenFile = join(options.dataDir, "daemon-token");
  Deno.mkdirSync(options.dataDir, { recursive: true });
  Deno.writeTextFileSync(tokenFile, BENCH_DAEMON_TOKEN + "\n");
  const daemon = startRunner([
    "daemon",
    "--url",
    options.hubUrl,
    "--daemon-id",
    options.daemonId,
    "--token-file",
    tokenFile,
    "--data-dir",
    options.dataDir,
  ]);
  await daemon.waitFor((line) =>
    line.includes(`connected to the hub as ${options.daemonId}`)
  );
  return daemon;
}

const hasCurl = (() => {
  try {
    return new Deno.Command("curl", { args: ["--version"], stdout: "null" })
      .outputSync().success;
  } catch {
    return false;
  }
})();

/** Options for {@linkcode streamRun}. */
export interface StreamRunOptions {
  /** The full URL to POST to. */
  url: string;
  /** The JSON body. */
  body: unknown;
  /** The `accept` header (SSE when omitted). */
  accept?: string;
}

/** POSTs a run and reads its whole streamed answer; what the client used and how many bytes came. */
export async function streamRun(options: StreamRunOptions): Promise<Usage> {
  const accept = options.accept ?? "text/event-stream";
  if (hasCurl) {
    return await measureCommand([
      "curl",
      "-sSN",
      "--fail",
      "-X",
      "POST",
      "-H",
      "content-type: application/json",
      "-H",
      `accept: ${accept}`,
      "-H",
      `authorization: ${BENCH_AUTH.authorization}`,
      "--data-binary",
      JSON.stringify(options.body),
      options.url,
    ]);
  }
  const started = performance.now();
  const response = await fetch(options.url, {
    method: "POST",
    headers: { "content-type": "application/json", accept, ...BENCH_AUTH },
    body: JSON.stringify(options.body),
  });
  let bytes = 0;
  for await (const chunk of response.body!) bytes += chunk.length;
  // In-process client: its CPU is not separable from the bench's; count 0.
  return {
    wallMs: performance.now() - started,
    cpuMs: 0,
    peakRssMib: 0,
    stdoutBytes: bytes,
  };
}

/** Whether the stream client is curl (else an in-process fetch whose CPU is not counted). */
export function curlClient(): boolean {
  return hasCurl;
}
