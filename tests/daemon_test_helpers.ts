/**
 * A `runner serve` with its daemon hub enabled and a real `runner daemon`
 * subprocess dialling in, for end-to-end daemon tests.
 *
 * @module
 */

import { join } from "node:path";
import type { DaemonJob } from "../lib/daemon/client.ts";
import type { JsonObject } from "../lib/relay.ts";
import { parseRunConfig } from "../lib/config.ts";
import { buildRunStartPayload } from "../lib/relay/payload.ts";
import { createHub, serveHub } from "../lib/hub/relay_hub.ts";
import { createDaemonLocation } from "../lib/locations/daemon.ts";
import { runnerLocations } from "../lib/locations/runner_locations.ts";
import { createRunManager, type RunManager } from "../lib/run/manager.ts";
import { openStore } from "../lib/store/open.ts";
import type { RunStore } from "../lib/store/types.ts";
import type { Logger } from "../lib/log.ts";
import { daemonCliArgs, spawnCli, tempDir } from "./helpers.ts";
import {
  postJson,
  type ServeProcess,
  startServe,
} from "./serve_test_helpers.ts";
import { startRelayTap } from "./relay_tap.ts";

/** The hub token the serve-plus-daemon tests share. */
export const DAEMON_TOKEN = "serve-daemon-test-Zp4Qr8Wm2Kx6Ty1Bn5Vc9Hd3";

/**
 * The daemon token a `runner serve --daemon-enabled` given none keeps in its
 * data dir, as `runner token --show --daemon` prints it.
 */
export async function keptDaemonToken(dataDir: string): Promise<string> {
  return (await Deno.readTextFile(join(dataDir, "daemon-token")))
    .replace(/\n$/, "");
}

/** Options of {@linkcode daemonProcess}. */
export interface DaemonProcessOptions {
  /** More `runner daemon` arguments. */
  args?: string[];
  /** More environment. */
  env?: Record<string, string>;
  /** `--data-dir` (default: a fresh one); a serve's finds its kept token. */
  dataDir?: string;
}

/**
 * Starts `runner daemon` dialling `url` through a tap that checks every frame
 * against the relay contract (`relay_tap.ts`); `connected` resolves once the
 * hub accepted it, and `stop()` fails on the first frame that broke the
 * contract. Without `tokenFile` the daemon finds its token itself (the one a
 * serve on this machine keeps in `options.dataDir`).
 */
export function daemonProcess(
  url: string,
  daemonId: string,
  tokenFile: string | undefined,
  options: DaemonProcessOptions = {},
) {
  const tap = startRelayTap(url);
  const child = spawnCli(
    daemonCliArgs(
      tap.url,
      daemonId,
      ...(tokenFile === undefined ? [] : ["--token-file", tokenFile]),
      "--data-dir",
      options.dataDir ?? tempDir(),
      ...(options.args ?? []),
    ),
    { env: options.env },
  );
  const { connected, logs, drained } = watchDaemonLog(child, daemonId);
  return {
    connected,
    /** What the daemon wrote to stderr so far. */
    logs,
    /** The tap between the daemon and the hub. */
    tap,
    /** `signal` (SIGTERM unless named), then waits for the exit; resolves with the exit code. */
    async stop(signal: Deno.Signal = "SIGTERM"): Promise<number> {
      try {
        child.kill(signal);
      } catch { /* already exited */ }
      const status = await child.status;
      await child.stdout.cancel();
      await drained;
      await tap.close();
      tap.assertClean();
      return status.code;
    },
  };
}

/** A file holding {@linkcode DAEMON_TOKEN}, for a daemon's `--token-file`. */
export function daemonTokenFile(): string {
  const tokenFile = join(tempDir(), "token");
  Deno.writeTextFileSync(tokenFile, DAEMON_TOKEN + "\n");
  return tokenFile;
}

/** Options of {@linkcode serveWithHub}. */
export interface ServeWithHubOptions {
  /** Arguments before the hub's (`--allow-custom-commands` when absent). */
  serveArgs?: string[];
  /** The data directory (a fresh one when absent). */
  dataDir?: string;
  /** The server's environment on top of the test's (`RUNNER_*` ones are not inherited). */
  serveEnv?: Record<string, string>;
}

/**
 * `runner serve` with its hub enabled on a free port, daemons admitted with
 * {@linkcode DAEMON_TOKEN}; resolves once the hub listens, with its URL.
 */
export async function serveWithHub(options: ServeWithHubOptions = {}) {
  const serve = await startServe({
    dataDir: options.dataDir ?? tempDir(),
    args: [
      ...(options.serveArgs ?? ["--allow-custom-commands"]),
      "--daemon-enabled",
      "--daemon-port",
      "0",
      "--daemon-token",
      DAEMON_TOKEN,
    ],
    env: options.serveEnv,
  });
  return { serve, hubUrl: await hubUrlOf(serve) };
}

/** The URL the daemon hub of `serve` listens on, once its log says so. */
export async function hubUrlOf(
  serve: Pick<ServeProcess, "waitForLog">,
): Promise<string> {
  const hubLine = await serve.waitForLog((entry) =>
    entry.msg === "daemon hub listening"
  );
  return String(hubLine.url);
}

/** `runner serve` with its hub enabled, and a `runner daemon` dialling in (token from a file). */
export async function serveWithDaemon(
  daemonId: string,
  options: {
    serveArgs?: string[];
    /** The server's environment on top of the test's. */
    serveEnv?: Record<string, string>;
    daemonArgs?: string[];
    /** The daemon's environment on top of the test's. */
    daemonEnv?: Record<string, string>;
  } = {},
) {
  const { serve, hubUrl } = await serveWithHub({
    serveArgs: ["--allow-custom-commands", ...(options.serveArgs ?? [])],
    serveEnv: options.serveEnv,
  });
  return {
    serve,
    daemon: daemonProcess(hubUrl, daemonId, daemonTokenFile(), {
      args: options.daemonArgs,
      env: options.daemonEnv,
    }),
  };
}

/** A `runner daemon` process's log, read as it comes. */
export interface DaemonLog {
  /** Resolves once the hub accepted `daemonId`; rejects if the daemon exits first. */
  connected: Promise<void>;
  /** What the daemon wrote to stderr so far. */
  logs(): string;
  /** Resolves once stderr ended. */
  drained: Promise<void>;
}

/** Reads the stderr of a `runner daemon` child dialling in as `daemonId`. */
export function watchDaemonLog(
  child: Deno.ChildProcess,
  daemonId: string,
): DaemonLog {
  let text = "";
  const ready = Promise.withResolvers<void>();
  const drained = (async () => {
    for await (
      const chunk of child.stderr.pipeThrough(new TextDecoderStream())
    ) {
      text += chunk;
      if (text.includes(`connected to the hub as ${daemonId}`)) ready.resolve();
    }
    ready.reject(new Error(`daemon exited: ${text}`));
  })();
  ready.promise.catch(() => {});
  return { connected: ready.promise, logs: () => text, drained };
}

/**
 * A hub job of `payload` for a daemon job runner's `runJob`, never
 * cancelled, with no hub capabilities and no MCP answers; each event goes
 * to `emit`.
 */
export function hubJob(
  jobId: string,
  payload: JsonObject,
  emit: DaemonJob["emit"],
): DaemonJob {
  return {
    jobId,
    payload,
    emit,
    signal: new AbortController().signal,
    mcp: () => Promise.resolve(null),
    hubCapabilities: [],
    onPermissionAnswer() {},
  };
}

/** What {@linkcode postDaemonRun} asks `runner serve` for. */
export interface DaemonRunRequest {
  /** The daemon that carries the run out. */
  daemonId: string;
  /** The prompt (default: "through the daemon"). */
  text?: string;
  /** The provider (default: "custom"). */
  provider?: string;
  /** The rest of the run's config. */
  config?: Record<string, unknown>;
}

/**
 * POSTs a run to `runner serve` at `serveUrl` at `location: "daemon"` on the
 * daemon `request.daemonId`, with the server's API token unless `headers`
 * name their own `Authorization`; resolves with the API's response.
 */
export function postDaemonRun(
  serveUrl: string,
  request: DaemonRunRequest,
  headers: Record<string, string> = {},
): Promise<Response> {
  return postJson(`${serveUrl}/v1/runs`, {
    input: { text: request.text ?? "through the daemon" },
    config: {
      provider: request.provider ?? "custom",
      location: "daemon",
      "daemon-id": request.daemonId,
      ...request.config,
    },
  }, headers);
}

/**
 * The `run.start` payload our hub sends for a run of the config `keys` (in
 * the workspace `/w` unless they name one), with `spec` over the defaults.
 */
export function hubRunStart(
  keys: Record<string, unknown>,
  spec: Partial<Parameters<typeof buildRunStartPayload>[0]> = {},
): JsonObject {
  return buildRunStartPayload({
    runId: "r1",
    input: { text: "hi" },
    config: parseRunConfig({ workspace: "/w", ...keys }),
    ...spec,
  });
}

/**
 * The `config` of the `run.start` the hub sends for a `codex` run on the
 * daemon "laptop" with the run config `extra`.
 */
export function hubRunStartConfig(extra: Record<string, unknown>): JsonObject {
  return buildRunStartPayload({
    runId: "r",
    input: { text: "hi" },
    config: parseRunConfig({
      provider: "codex",
      location: "daemon",
      "daemon-id": "laptop",
      ...extra,
    }),
  }).config as JsonObject;
}

/** An in-process hub and a run manager whose daemon location uses it. */
export interface HubWithManager {
  store: RunStore;
  hub: ReturnType<typeof createHub>;
  /** The hub's listener (daemons dial `server.url`). */
  server: ReturnType<typeof serveHub>;
  manager: RunManager;
  /** Closes the hub, its listener and the store. */
  close(): Promise<void>;
}

/**
 * Starts a hub taking `token` on 127.0.0.1, over a fresh data dir, and a run
 * manager with its daemon location; `log` receives the location's lines.
 */
export async function hubWithManager(
  token: string,
  log?: Logger,
): Promise<HubWithManager> {
  const dataDir = tempDir();
  const store = await openStore({ dataDir });
  const hub = createHub({ token, stateDir: join(dataDir, "relay") });
  const server = serveHub({ hub });
  const manager = createRunManager({
    store,
    locations: runnerLocations(createDaemonLocation({ hub, log })),
  });
  return {
    store,
    hub,
    server,
    manager,
    async close() {
      await hub.close();
      await server.close();
      await store.close();
    },
  };
}
