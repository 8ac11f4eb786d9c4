/**
 * Helpers for the `runner serve` tests: start the real CLI as a subprocess
 * (with the runtime permission flags), read its JSON log, talk HTTP to it,
 * parse SSE/NDJSON, and drive the fixture agent's gate FIFO.
 *
 * @module
 */

import assert from "node:assert/strict";
import { assertHttpEvent, assertN8nObject } from "./contracts.ts";
import { join } from "node:path";
import { DENO_RUN_FLAGS } from "../lib/runtime_permissions.ts";
import type { RunEvent } from "../lib/events.ts";
import {
  agentCommand,
  plainEnvironment,
  tempDir as makeTempDir,
} from "./helpers.ts";

const ROOT = new URL("..", import.meta.url).pathname;
const MAIN = join(ROOT, "main.ts");
const CONFIG = join(ROOT, "deno.json");

/** The fixture agent's command line with `flags` (quoted). */
export { agentCommand } from "./helpers.ts";

/** The API token each running test server accepts, by its origin. */
const apiTokens = new Map<string, string>();

/**
 * Remembers the API token of the server at `url` (until
 * {@linkcode forgetApiToken}), for {@linkcode apiFetch} and
 * {@linkcode postJson}.
 */
export function rememberApiToken(url: string, token: string | undefined): void {
  if (token) apiTokens.set(new URL(url).origin, token);
}

/** Forgets the API token of the server at `url` (it stopped). */
export function forgetApiToken(url: string): void {
  apiTokens.delete(new URL(url).origin);
}

/** The `Authorization` header a client of the server at `url` sends (none when it takes no token). */
export function apiHeaders(url: string | URL): Record<string, string> {
  const token = apiTokens.get(new URL(url).origin);
  return token ? { authorization: `Bearer ${token}` } : {};
}

/** The `Authorization` line of a raw HTTP/1.1 request head to the server at `url` (empty when it takes no token). */
export function apiHeaderLine(url: string | URL): string {
  return Object.entries(apiHeaders(url)).map(([name, value]) =>
    `${name}: ${value}\r\n`
  ).join("");
}

/**
 * `fetch` as a client that holds the server's API token: it sends
 * `Authorization: Bearer <token>` unless `init` names its own
 * `Authorization`. Tests of what a caller without the token sees use
 * plain `fetch`.
 */
export function apiFetch(
  input: string | URL,
  init: RequestInit = {},
): Promise<Response> {
  const headers = new Headers(init.headers);
  for (const [name, value] of Object.entries(apiHeaders(input))) {
    if (!headers.has(name)) headers.set(name, value);
  }
  return fetch(input, { ...init, headers });
}

/**
 * The API token `runner serve` started with these arguments and environment
 * accepts: `--api-token`/`--api-token-file`/`RUNNER_API_TOKEN`, else (unless
 * `--loopback-without-token`) the one it keeps in the data dir.
 */
export async function serveApiToken(
  options: Pick<StartServeOptions, "dataDir" | "args" | "env">,
): Promise<string | undefined> {
  const args = options.args ?? [];
  const valueOf = (flag: string) => {
    const at = args.lastIndexOf(flag);
    if (at >= 0) return args[at + 1];
    const joined = args.findLast((arg) => arg.startsWith(`${flag}=`));
    return joined?.slice(flag.length + 1);
  };
  const file = valueOf("--api-token-file") ??
    options.env?.RUNNER_API_TOKEN_FILE;
  if (file) return (await Deno.readTextFile(file)).replace(/\r?\n$/, "");
  const given = valueOf("--api-token") ?? options.env?.RUNNER_API_TOKEN;
  if (given) return given;
  if (
    args.includes("--loopback-without-token") ||
    options.env?.RUNNER_LOOPBACK_WITHOUT_TOKEN
  ) return undefined;
  const kept = await Deno.readTextFile(join(options.dataDir, "api-token"))
    .catch(() => undefined);
  return kept?.replace(/\n$/, "");
}

/** A running `runner serve`. */
export interface ServeProcess {
  /** `http://127.0.0.1:<port>`. */
  url: string;
  /** The API token it accepts (undefined with `--loopback-without-token`). */
  token?: string;
  /** The console URL it printed (with `#token=…` when it made the token). */
  consoleUrl: string;
  /** The child process. */
  child: Deno.ChildProcess;
  /** Everything it logged so far (stderr and stdout). */
  logs(): string;
  /** Its stderr so far: the log alone, without stdout's console line. */
  stderr(): string;
  /** Resolves once a log line satisfies `predicate`. */
  waitForLog(
    predicate: (entry: Record<string, unknown>) => boolean,
  ): Promise<Record<string, unknown>>;
  /** Sends `signal` and waits for the exit. */
  stop(signal?: Deno.Signal): Promise<Deno.CommandStatus>;
}

/** Options for {@linkcode startServe}. */
export interface StartServeOptions {
  /** The data directory. */
  dataDir: string;
  /** Extra arguments after `serve --port 0 --data-dir D`. */
  args?: string[];
  /** Extra environment. */
  env?: Record<string, string>;
  /** A command that runs the server (`["prlimit", "--nofile=1024:1024"]`). */
  wrapper?: string[];
}

function baseEnv(extra: Record<string, string> = {}): Record<string, string> {
  return { ...plainEnvironment(), ...extra };
}

/** Spawns `runner serve` without waiting for it (for start-up failures). */
export function spawnServe(options: StartServeOptions): Deno.ChildProcess {
  const [command, ...wrapperArgs] = [
    ...(options.wrapper ?? []),
    Deno.execPath(),
  ];
  return new Deno.Command(command, {
    args: [
      ...wrapperArgs,
      "run",
      ...DENO_RUN_FLAGS,
      "--config",
      CONFIG,
      MAIN,
      "serve",
      "--port",
      "0",
      "--data-dir",
      options.dataDir,
      ...(options.args ?? []),
    ],
    cwd: ROOT,
    env: baseEnv(options.env),
    clearEnv: true,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
}

/** Starts `runner serve` and waits for its `listening` log line. */
export async function startServe(
  options: StartServeOptions,
): Promise<ServeProcess> {
  const child = spawnServe(options);
  let text = "";
  const entries: Record<string, unknown>[] = [];
  let waiters: Array<() => void> = [];
  const notify = () => {
    const current = waiters;
    waiters = [];
    current.forEach((wake) => wake());
  };
  let closedStreams = 0;
  let errText = "";
  const pump = async (stream: ReadableStream<Uint8Array>, isErr: boolean) => {
    let partial = "";
    for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
      text += chunk;
      if (isErr) errText += chunk;
      partial += chunk;
      let newline: number;
      while ((newline = partial.indexOf("\n")) >= 0) {
        const line = partial.slice(0, newline);
        partial = partial.slice(newline + 1);
        try {
          entries.push(JSON.parse(line));
        } catch { /* not a log line */ }
      }
      notify();
    }
    closedStreams++;
    notify();
  };
  const pumped = Promise.all([
    pump(child.stdout, false),
    pump(child.stderr, true),
  ]);
  const waitForLog = async (
    predicate: (entry: Record<string, unknown>) => boolean,
  ) => {
    for (;;) {
      const found = entries.find(predicate);
      if (found) return found;
      if (closedStreams === 2) {
        throw new Error(`runner serve exited; log:\n${text}`);
      }
      await new Promise<void>((resolve) => waiters.push(resolve));
    }
  };
  let listening: Record<string, unknown>;
  let consoleUrl: string;
  try {
    listening = await waitForLog((entry) => entry.msg === "listening");
    // Printed right after the listening line.
    for (;;) {
      const line = /^console: (\S+)/m.exec(text);
      if (line) {
        consoleUrl = line[1];
        break;
      }
      if (closedStreams === 2) {
        throw new Error(`runner serve printed no console line:\n${text}`);
      }
      await new Promise<void>((resolve) => waiters.push(resolve));
    }
  } catch (error) {
    await child.status;
    await pumped;
    throw error;
  }
  const url = String(listening.url);
  const token = await serveApiToken(options);
  rememberApiToken(url, token);
  let exited: Promise<Deno.CommandStatus> | undefined;
  return {
    url,
    token,
    consoleUrl,
    child,
    logs: () => text,
    stderr: () => errText,
    waitForLog,
    async stop(signal: Deno.Signal = "SIGTERM") {
      if (!exited) {
        try {
          child.kill(signal);
        } catch { /* already gone */ }
        exited = child.status;
      }
      const status = await exited;
      await pumped;
      forgetApiToken(url);
      return status;
    },
  };
}

/** A fresh temporary directory, removed when the test module unloads. */
export function tempDir(): Promise<string> {
  return Promise.resolve(makeTempDir("runner_serve_test_"));
}

/** Makes a named pipe for the fixture's `--gate-fifo`. */
export async function makeFifo(path: string): Promise<void> {
  const { success } = await new Deno.Command("mkfifo", { args: [path] })
    .output();
  if (!success) throw new Error(`mkfifo ${path} failed`);
}

/** Fails unless `response` has `status`; discards its body. */
export async function assertStatus(
  response: Response,
  status: number,
): Promise<void> {
  assert.equal(response.status, status);
  await response.body?.cancel();
}

/** Makes the fifo `<dir>/<name>` for a fixture's `--gate-fifo`; returns its path. */
export async function gateIn(dir: string, name = "gate"): Promise<string> {
  const gate = join(dir, name);
  await makeFifo(gate);
  return gate;
}

/** Lets a gated fixture prompt finish (blocks until the agent opens the pipe). */
export async function openGate(path: string): Promise<void> {
  await Deno.writeTextFile(path, "go\n");
}

/** A run-config object for the fixture agent. */
export function fixtureConfig(
  workspace: string,
  flags: string[] = [],
): Record<string, unknown> {
  return { provider: "custom", "acp-command": agentCommand(flags), workspace };
}

/**
 * `runner serve` defaults that run the fixture agent with `flags` in
 * `<dir>/ws` for every request that names no config of its own.
 */
export function fixtureServeDefaults(
  dir: string,
  flags: string[] = [],
): string[] {
  return fixtureTargetArgs(join(dir, "ws"), flags);
}

/**
 * `runner serve` arguments whose operator target is the fixture agent with
 * `flags` in `workspace`.
 */
export function fixtureTargetArgs(
  workspace: string,
  flags: string[] = [],
): string[] {
  return [
    ...["--provider", "custom"],
    ...["--acp-command", agentCommand(flags)],
    ...["--workspace", workspace],
  ];
}

/**
 * {@linkcode fixtureTargetArgs} of a fixture agent that asks a permission
 * (options `allow_once`, `reject_once`) before it answers, and a policy that
 * leaves the question to the caller.
 */
export function askingTargetArgs(
  workspace: string,
  flags: string[] = [],
): string[] {
  return [
    ...fixtureTargetArgs(workspace, [
      ...flags,
      ...["--permission", "--permission-options", "allow_once,reject_once"],
    ]),
    ...["--permission-decision", "ask"],
  ];
}

/** POSTs JSON with the server's API token (unless `headers` name their own `Authorization`). */
export function postJson(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<Response> {
  return apiFetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
}

/** One parsed SSE message. */
export interface SseMessage {
  id?: string;
  event?: string;
  data: string;
}

/** Reads SSE messages from a response body as they arrive. */
export async function* readSse(
  body: ReadableStream<Uint8Array>,
): AsyncGenerator<SseMessage> {
  let buffer = "";
  for await (const chunk of body.pipeThrough(new TextDecoderStream())) {
    buffer += chunk;
    let end: number;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const message: SseMessage = { data: "" };
      let isComment = true;
      for (const line of block.split("\n")) {
        if (line.startsWith(":")) continue;
        isComment = false;
        const colon = line.indexOf(":");
        const field = line.slice(0, colon);
        const value = line.slice(colon + 1).replace(/^ /, "");
        if (field === "id") message.id = value;
        else if (field === "event") message.event = value;
        else if (field === "data") message.data += value;
      }
      if (!isComment) yield message;
    }
  }
}

/**
 * Checks each object a run stream carried against its contract: a run event
 * against `RunEvent` of `/openapi.json` (unless the caller asked for the
 * lean form, which leaves completions' text out), an n8n line against what
 * LangBot's n8n runner reads.
 */
export function assertStreamObject(
  value: Record<string, unknown>,
  response: Response,
): void {
  if ("run_id" in value && typeof value.type === "string") {
    if (!new URL(response.url).searchParams.has("completions")) {
      assertHttpEvent(value);
    }
  } else if (new URL(response.url).pathname.startsWith("/v1/webhooks/n8n")) {
    assertN8nObject(value);
  }
}

/**
 * Reads every SSE event of a response into run events, each checked against
 * its contract; `onEvent` sees each as it arrives (the stream waits for it).
 */
export async function sseEvents(
  response: Response,
  onEvent?: (event: RunEvent, seen: RunEvent[]) => void | Promise<void>,
): Promise<RunEvent[]> {
  const events: RunEvent[] = [];
  for await (const message of readSse(response.body!)) {
    const event = JSON.parse(message.data);
    assertStreamObject(event, response);
    events.push(event);
    await onEvent?.(event, events);
  }
  return events;
}

/**
 * Reads every line of an NDJSON (or newline-separated JSON) body, each run
 * event or n8n object checked against its contract.
 */
export async function jsonLines(
  response: Response,
): Promise<Record<string, unknown>[]> {
  const text = await response.text();
  return text.split("\n").filter((line) => line.trim()).map((line) => {
    const value = JSON.parse(line);
    assertStreamObject(value, response);
    return value;
  });
}

/** The text of a run's `message.delta` events. */
export function deltaText(events: RunEvent[]): string {
  return events
    .filter((event) => event.type === "message.delta")
    .map((event) => (event.data.chunk as { content: string }).content)
    .join("");
}

/** The terminal events of a list. */
export function terminals(events: RunEvent[]): RunEvent[] {
  return events.filter((event) =>
    event.type === "run.completed" || event.type === "run.failed"
  );
}

/** Whether a process id is alive (and not a zombie). */
export function processAlive(pid: number): boolean {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0] !== "Z";
  } catch {
    return false;
  }
}

/** Starts a server in a fresh temporary directory, runs `body`, then stops it (SIGTERM) and cleans up. */
export async function withServe(
  options: Omit<StartServeOptions, "dataDir">,
  body: (serve: ServeProcess, dir: string) => Promise<void>,
): Promise<void> {
  const dir = await tempDir();
  const serve = await startServe({ dataDir: join(dir, "data"), ...options });
  try {
    await body(serve, dir);
  } finally {
    await serve.stop("SIGTERM");
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

/** Options of {@linkcode withFixtureServe} and {@linkcode withGatedServe}. */
export interface FixtureServeOptions {
  /** Flags of the fixture agent. */
  fixtureFlags?: string[];
  /** More `runner serve` arguments. */
  args?: string[];
}

/**
 * {@linkcode withServe} on a server whose operator target (for requests that
 * name no config) is the fixture agent with `fixtureFlags` in `<dir>/ws`.
 */
export async function withFixtureServe(
  options: FixtureServeOptions,
  body: (serve: ServeProcess, dir: string) => Promise<void>,
): Promise<void> {
  const dir = await tempDir();
  const defaults = fixtureServeDefaults(dir, options.fixtureFlags);
  await withServe(
    { args: [...defaults, ...options.args ?? []] },
    (serve) => body(serve, dir),
  );
}

/**
 * {@linkcode withFixtureServe} with the fixture agent waiting at the fifo
 * `gate` before each answer (see {@linkcode openGate}).
 */
export async function withGatedServe(
  options: FixtureServeOptions,
  body: (serve: ServeProcess, gate: string) => Promise<void>,
): Promise<void> {
  const gate = await gateIn(await tempDir());
  const fixtureFlags = ["--gate-fifo", gate, ...options.fixtureFlags ?? []];
  await withFixtureServe(
    { fixtureFlags, args: options.args },
    (serve) => body(serve, gate),
  );
}

/** Reads SSE messages into `into` until one satisfies `predicate` (the stream stays open). */
export async function readUntil(
  messages: AsyncGenerator<SseMessage>,
  into: RunEvent[],
  predicate: (message: SseMessage) => boolean,
): Promise<void> {
  for (;;) {
    const { value, done } = await messages.next();
    if (done) {
      throw new Error(
        `the stream ended before the expected event; got ${
          into.map((e) => e.type)
        }`,
      );
    }
    into.push(JSON.parse(value.data));
    if (predicate(value)) return;
  }
}

/** A run's stream read up to a point and left open. */
export interface OpenStream {
  /** The events read so far, the one waited for last. */
  events: RunEvent[];
  /** The rest of the stream. */
  messages: AsyncGenerator<SseMessage>;
}

/**
 * Reads the run stream `response` carries until its first `event` message
 * (the stream stays open); fails if the stream ends before one.
 */
export async function streamUntil(
  response: Response,
  event: string,
): Promise<OpenStream> {
  const events: RunEvent[] = [];
  const messages = readSse(response.body!);
  await readUntil(messages, events, (message) => message.event === event);
  return { events, messages };
}

/** A run whose first SSE connection was read up to its first delta, then dropped. */
export interface DroppedStream {
  /** The run id (`x-run-id`). */
  runId: string;
  /** The fixture's gate FIFO (each write lets the agent go on). */
  gate: string;
  /** The events the dropped connection carried. */
  first: RunEvent[];
  /** The last sequence it carried (what `Last-Event-ID` names). */
  seen: number;
}

/**
 * Makes a gate FIFO in `dir`, POSTs `body(gate)` to `/v1/runs`, reads the
 * SSE stream until the first `message.delta`, then drops the connection: a
 * client whose network broke mid-run, while the agent waits at the gate.
 */
export async function dropAfterFirstDelta(
  serve: ServeProcess,
  dir: string,
  body: (gate: string) => Record<string, unknown>,
): Promise<DroppedStream> {
  const gate = join(dir, "gate");
  await makeFifo(gate);
  const response = await postJson(`${serve.url}/v1/runs`, body(gate));
  if (response.status !== 200) {
    throw new Error(
      `POST /v1/runs: ${response.status} ${await response.text()}`,
    );
  }
  const first: RunEvent[] = [];
  const messages = readSse(response.body!);
  await readUntil(messages, first, (m) => m.event === "message.delta");
  await messages.return(undefined);
  return {
    runId: response.headers.get("x-run-id")!,
    gate,
    first,
    seen: first.at(-1)!.sequence!,
  };
}

/**
 * {@linkcode dropAfterFirstDelta} of a run with `text` of the fixture agent
 * with `fixtureFlags` in `<dir>/ws`, waiting at the gate.
 */
export function dropFixtureRun(
  serve: ServeProcess,
  dir: string,
  run: { text: string; fixtureFlags: string[] },
): Promise<DroppedStream> {
  return dropAfterFirstDelta(serve, dir, (gate) => ({
    input: { text: run.text },
    config: fixtureConfig(join(dir, "ws"), [
      ...run.fixtureFlags,
      ...["--gate-fifo", gate],
    ]),
  }));
}

/**
 * Reconnects to a {@linkcode DroppedStream}'s run with `Last-Event-ID` (the
 * path may carry a `query`), reads one event while the agent still waits,
 * then opens the gate once and reads the rest of the stream.
 */
export async function resumeThroughGate(
  serve: ServeProcess,
  dropped: Pick<DroppedStream, "runId" | "gate" | "seen">,
  query = "",
): Promise<RunEvent[]> {
  const resumed = await apiFetch(
    `${serve.url}/v1/runs/${dropped.runId}/events${query}`,
    { headers: { "last-event-id": String(dropped.seen) } },
  );
  if (resumed.status !== 200) {
    throw new Error(`resume: ${resumed.status} ${await resumed.text()}`);
  }
  const rest = readSse(resumed.body!);
  const events: RunEvent[] = [];
  await readUntil(rest, events, () => true);
  await openGate(dropped.gate);
  for await (const message of rest) events.push(JSON.parse(message.data));
  return events;
}
