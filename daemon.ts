/**
 * `runner daemon`: runs jobs from a hub on this machine. It dials out to the
 * hub over a WebSocket (coding-relay-v1), so it works behind NAT. It speaks
 * to `runner serve` and to the LangBot ACP runner plugin's hub alike. See
 * `docs/daemon.md`.
 *
 * @module
 */

import {
  parseFlags,
  registryUrlFromEnv,
  reportUsageError,
} from "./lib/cli/args.ts";
import { join } from "node:path";
import { reportFailure } from "./lib/cli/args.ts";
import { runDaemonClient } from "./lib/daemon/client.ts";
import { createDaemonJobRunner } from "./lib/daemon/job.ts";
import { isRegistryUrl } from "./lib/config_schema.ts";
import type { DaemonSandbox, DaemonTerminals } from "./lib/relay/payload.ts";
import {
  type DaemonFloor,
  daemonFloorFromFlags,
} from "./lib/daemon/job_floor.ts";
import { requireSandbox } from "./lib/agent/sandbox.ts";
import { RunnerError, toRunnerError } from "./lib/errors.ts";
import { DECIMAL_PATTERN, parseRunConfig } from "./lib/config.ts";
import {
  createLogger,
  LOG_FORMATS,
  LOG_LEVELS,
  type LogFormat,
  type Logger,
  type LogLevel,
} from "./lib/log.ts";
import {
  createReaperRegistry,
  reapLeftoverGroups,
} from "./lib/agent/reaper.ts";
import {
  MAX_DAEMON_ID_LENGTH,
  PING_INTERVAL_MS,
  PING_TIMEOUT_MS,
  RECONNECT_DELAY_MS,
} from "./lib/relay.ts";
import { defaultDataDir } from "./lib/store/data_dir.ts";
import { isLoopbackHost, tokenProblem } from "./lib/hub/token_rules.ts";
import {
  daemonTokenPath,
  readKeptDaemonToken,
} from "./lib/cli/serve/daemon_token.ts";
import { checkWarmPoolOptions, createWarmPool } from "./lib/run/warm/pool.ts";
import { preloadAcpClient } from "./lib/run/startup.ts";
import { RUNNER_VERSION } from "./lib/version.ts";

const HELP = `Usage: runner daemon --url ws://HOST:PORT --daemon-id ID [options]

Connects out to a coding-relay-v1 hub (runner serve --daemon-enabled, or the
LangBot ACP runner plugin's daemon hub) and runs the ACP agents of its
location=daemon runs on this machine. See docs/daemon.md.

Options:
  --url URL              the hub, ws://HOST:PORT or wss://HOST:PORT (required)
  --daemon-id ID         this machine's stable ID, as runs name it (required)
  --token-file FILE      read the hub's shared token from FILE
  --token TOKEN          the token itself (visible to other local users in
                         the process list; prefer --token-file)
                         (default: $RUNNER_DAEMON_TOKEN; else, when --url is
                         on loopback, the token runner serve keeps in
                         DATA_DIR/daemon-token, read before each connection)
  --data-dir DIR         agent records for crash cleanup, and where a runner
                         serve on this machine keeps its daemon token
                         (default: the user data dir, $RUNNER_DATA_DIR);
                         also the ACP registry's cache and the registry
                         agents installed for this machine's platform
  --registry-url URL     the ACP agent registry this daemon installs a hub's
                         registry agents from (default: the official one;
                         file:// and http:// on loopback work)
  --reconnect-delay S    first reconnect delay in seconds (default 5;
                         doubles per failed attempt up to 60)
  --ping-interval S      seconds between keep-alive pings (default 20)
  --ping-timeout S       seconds without any hub frame after a ping before
                         the connection counts as dead (default 60; the
                         clock stands still while a tool call is outstanding)
  --agent-idle-timeout S keep a session's agent warm this many seconds
                         between jobs (default 300; 0 = never)
  --max-warm-agents N    warm agents at most, least recently used stopped
                         first (default 16; 0 = none)
  --sandbox MODE         off (default: as run.start asks) or confined: every
                         job's agent runs under bubblewrap, whatever the hub
                         asks (docs/sandbox.md)
  --sandbox-network MODE with confined: full (default: the internet, not the
                         host's loopback), none, or host (the host's network,
                         its loopback services included)
  --sandbox-read-paths LIST, --sandbox-write-paths LIST
                         more paths confined agents may read / write (the
                         hub cannot name any)
  --client-terminals B   true: run the agents' terminal commands when run.start
                         asks (client-terminals); false (default): never,
                         whatever the hub asks (docs/permissions.md)
  --terminal-timeout S   the longest terminal-timeout a job gets (default 600;
                         the hub may only lower it)
  --fs-read B, --fs-write B
                         true: serve the agents' fs/read_text_file /
                         fs/write_text_file inside the workspace when run.start
                         asks; false (default): never, whatever the hub asks
  --workspace-roots LIST directories a job's workspace must lie in (by real
                         path); unset: any but this daemon's data dir, home,
                         / and their parents, and none with --sandbox confined
  --caller-modes LIST, --caller-models LIST, --caller-session-config-keys LIST
                         the modes, models and session option ids a hub may
                         ask for (unset: any; a remembered value outside them
                         is dropped; docs/daemon.md)
  --log-level LEVEL      debug | info | warn | error (default info)
  --log-format FORMAT    json | text (default: text on a terminal, else json)
  -h, --help             this text

Exit codes: 0 stopped by SIGINT/SIGTERM, 1 cleanup unconfirmed or another
failure, 2 bad options.
`;

interface DaemonSettings {
  url: string;
  daemonId: string;
  /** The token given (flag, file, environment), or the kept one read at start. */
  token: string;
  tokenFromFlag: boolean;
  /**
   * Where the token runner serve keeps is read from, before each connection,
   * when no token was given and the hub is on loopback.
   */
  keptTokenDir?: string;
  dataDir: string;
  /** `--registry-url`: where this daemon looks up a hub's registry agents. */
  registryUrl?: string;
  reconnectDelayMs: number;
  pingIntervalMs: number;
  pingTimeoutMs: number;
  /** Seconds a warm agent may stay idle (0: off). */
  agentIdleTimeout: number;
  /** Warm agents at most (0: off). */
  maxWarmAgents: number;
  /** The least severe log level written. */
  logLevel: LogLevel;
  /** The log line format (default: by the terminal). */
  logFormat?: LogFormat;
  /** The daemon's own sandbox settings. */
  sandbox: DaemonSandbox;
  /** The daemon's own client-terminal settings. */
  terminals: DaemonTerminals;
  /** The daemon's own floor under a hub's workspace and session values. */
  floor: DaemonFloor;
}

function invalid(message: string): RunnerError {
  return new RunnerError("config.invalid", message);
}

async function settingsFrom(
  values: Record<string, string | boolean | undefined>,
): Promise<DaemonSettings> {
  const url = String(values.url ?? "").trim();
  if (!url) {
    throw invalid("--url is required, e.g. --url ws://hub.example:8766");
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw invalid(`--url ${url} is not a URL; use ws://HOST:PORT`);
  }
  if (parsed.protocol !== "ws:" && parsed.protocol !== "wss:") {
    throw invalid(
      `--url must start with ws:// or wss:// (got ${parsed.protocol}//); the hub is a WebSocket listener, e.g. ws://HOST:8766`,
    );
  }
  const daemonId = String(values["daemon-id"] ?? "").trim();
  if (!daemonId || daemonId.length > MAX_DAEMON_ID_LENGTH) {
    throw invalid(
      `--daemon-id is required: a stable name for this machine of at most ${MAX_DAEMON_ID_LENGTH} characters, e.g. --daemon-id alice-laptop`,
    );
  }
  const tokenFile = values["token-file"];
  if (values.token !== undefined && tokenFile !== undefined) {
    throw invalid("give either --token or --token-file, not both");
  }
  let token = values.token === undefined ? undefined : String(values.token);
  if (typeof tokenFile === "string") {
    try {
      token = (await Deno.readTextFile(tokenFile)).replace(/\r?\n$/, "");
    } catch (error) {
      throw invalid(
        `--token-file ${tokenFile}: cannot read it (${
          error instanceof Error ? error.message : error
        })`,
      );
    }
  }
  token ??= Deno.env.get("RUNNER_DAEMON_TOKEN") || undefined;
  const warm = warmPoolSettings(values);
  const dataDir = typeof values["data-dir"] === "string"
    ? values["data-dir"]
    : defaultDataDir();
  // A runner serve on this machine keeps its hub's token in the data dir.
  const keptTokenDir = token === undefined && isLoopbackHost(parsed.hostname)
    ? dataDir
    : undefined;
  if (keptTokenDir !== undefined) {
    token = await readKeptDaemonToken(keptTokenDir);
  }
  return {
    url,
    daemonId,
    token: token ?? "",
    keptTokenDir,
    ...warm,
    ...logSettings(values),
    sandbox: sandboxSettings(values),
    terminals: terminalSettings(values),
    floor: daemonFloorFromFlags(values, dataDir),
    tokenFromFlag: values.token !== undefined,
    dataDir,
    registryUrl: registryUrlFlag(
      values["registry-url"] ?? registryUrlFromEnv(),
    ),
    reconnectDelayMs: secondsFlag(
      values,
      "reconnect-delay",
      RECONNECT_DELAY_MS,
    ),
    pingIntervalMs: secondsFlag(values, "ping-interval", PING_INTERVAL_MS),
    pingTimeoutMs: secondsFlag(values, "ping-timeout", PING_TIMEOUT_MS),
  };
}

/** `--sandbox*`, checked like the run-config keys they are. */
function sandboxSettings(
  values: Record<string, string | boolean | undefined>,
): DaemonSandbox {
  const config = parseRunConfig({
    provider: "custom",
    workspace: "/",
    "langbot-assets-enabled": false,
    sandbox: values.sandbox,
    "sandbox-network": values["sandbox-network"],
    "sandbox-read-paths": values["sandbox-read-paths"],
    "sandbox-write-paths": values["sandbox-write-paths"],
  });
  // A daemon that must confine every job but cannot does not start.
  if (config.sandbox === "confined") requireSandbox();
  return {
    sandbox: config.sandbox,
    sandboxNetwork: config.sandboxNetwork,
    sandboxReadPaths: config.sandboxReadPaths,
    sandboxWritePaths: config.sandboxWritePaths,
  };
}

/** `--client-terminals` and `--terminal-timeout`, checked like the run-config keys they are. */
function terminalSettings(
  values: Record<string, string | boolean | undefined>,
): DaemonTerminals {
  const config = parseRunConfig({
    provider: "custom",
    workspace: "/",
    "langbot-assets-enabled": false,
    "client-terminals": values["client-terminals"],
    "terminal-timeout": values["terminal-timeout"],
  });
  return {
    clientTerminals: config.clientTerminals,
    terminalTimeout: config.terminalTimeout,
  };
}

/** `--agent-idle-timeout` and `--max-warm-agents`, checked. */
function warmPoolSettings(
  values: Record<string, string | boolean | undefined>,
): Pick<DaemonSettings, "agentIdleTimeout" | "maxWarmAgents"> {
  const number = (name: string, fallback: number) => {
    const raw = values[name];
    if (raw === undefined) return fallback;
    if (typeof raw !== "string" || !DECIMAL_PATTERN.test(raw.trim())) {
      throw invalid(`--${name} must be a number, written in decimal`);
    }
    return Number(raw);
  };
  const settings = {
    agentIdleTimeout: number("agent-idle-timeout", 300),
    maxWarmAgents: number("max-warm-agents", 16),
  };
  checkWarmPoolOptions({
    idleTimeout: settings.agentIdleTimeout,
    maxAgents: settings.maxWarmAgents,
  });
  return settings;
}

/** `--log-level` and `--log-format`, checked. */
function logSettings(
  values: Record<string, string | boolean | undefined>,
): Pick<DaemonSettings, "logLevel" | "logFormat"> {
  const choice = <T extends string>(name: string, allowed: readonly T[]) => {
    const raw = values[name];
    if (raw === undefined) return undefined;
    const value = String(raw).trim().toLowerCase();
    if (!allowed.includes(value as T)) {
      throw invalid(`--${name} must be one of ${allowed.join(", ")}`);
    }
    return value as T;
  };
  return {
    logLevel: choice("log-level", LOG_LEVELS) ?? "info",
    logFormat: choice("log-format", LOG_FORMATS),
  };
}

/** A flag in seconds (> 0) as milliseconds; `defaultMs` when absent. */
function secondsFlag(
  values: Record<string, string | boolean | undefined>,
  name: string,
  defaultMs: number,
): number {
  const value = values[name];
  if (value === undefined) return defaultMs;
  const seconds = Number(value);
  if (!Number.isFinite(seconds) || seconds <= 0) {
    throw invalid(`--${name} must be a number of seconds > 0`);
  }
  return seconds * 1000;
}

function warnAboutToken(settings: DaemonSettings, log: Logger): void {
  if (!settings.token && settings.keptTokenDir !== undefined) {
    log({
      level: "warn",
      msg: `no daemon token given, and none kept in ${
        daemonTokenPath(settings.keptTokenDir)
      } yet: runner serve --daemon-enabled makes it on its first start with that data dir (this daemon looks again before each connection). Else pass --data-dir of the serve, --token-file FILE or RUNNER_DAEMON_TOKEN`,
    });
    return;
  }
  if (!settings.token) {
    log({
      level: "warn",
      msg:
        "no daemon token given; only a hub without a token will accept this daemon. Pass --token-file FILE or set RUNNER_DAEMON_TOKEN",
    });
    return;
  }
  const problem = tokenProblem(settings.token);
  if (problem) {
    log({
      level: "warn",
      msg:
        `the daemon token looks weak: ${problem}. Generate a new one with \`runner token\` and configure it on both sides`,
    });
  }
  if (settings.tokenFromFlag) {
    log({
      level: "warn",
      msg:
        "--token is visible to other users of this machine in the process list; prefer --token-file or RUNNER_DAEMON_TOKEN",
    });
  }
}

function listenForSignals(onSignal: () => void): () => void {
  const signals: Deno.Signal[] = Deno.build.os === "windows"
    ? ["SIGINT"]
    : ["SIGINT", "SIGTERM"];
  for (const signal of signals) Deno.addSignalListener(signal, onSignal);
  return () => {
    for (const signal of signals) Deno.removeSignalListener(signal, onSignal);
  };
}

/** The flags of `runner daemon`, or the exit code when there is nothing to run. */
function parseDaemonFlags(
  args: string[],
): Record<string, string | boolean | undefined> | number {
  let values;
  try {
    ({ values } = parseFlags({
      args,
      options: {
        url: { type: "string" },
        "daemon-id": { type: "string" },
        token: { type: "string" },
        "token-file": { type: "string" },
        "data-dir": { type: "string" },
        "registry-url": { type: "string" },
        "reconnect-delay": { type: "string" },
        "ping-interval": { type: "string" },
        "ping-timeout": { type: "string" },
        "agent-idle-timeout": { type: "string" },
        "max-warm-agents": { type: "string" },
        "log-level": { type: "string" },
        "log-format": { type: "string" },
        sandbox: { type: "string" },
        "sandbox-network": { type: "string" },
        "sandbox-read-paths": { type: "string" },
        "sandbox-write-paths": { type: "string" },
        "client-terminals": { type: "string" },
        "terminal-timeout": { type: "string" },
        "workspace-roots": { type: "string" },
        "caller-modes": { type: "string" },
        "caller-models": { type: "string" },
        "caller-session-config-keys": { type: "string" },
        "fs-read": { type: "string" },
        "fs-write": { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    }));
  } catch (error) {
    return reportUsageError(error, "daemon");
  }
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  return values;
}

/** What runs a daemon's jobs: the job runner and the warm agents it keeps. */
interface DaemonJobs {
  runner: ReturnType<typeof createDaemonJobRunner>;
  warmPool: ReturnType<typeof createWarmPool>;
}

/** Reaps what an earlier daemon left behind, then sets up the job runner. */
async function startDaemonJobs(
  settings: DaemonSettings,
  log: Logger,
): Promise<DaemonJobs> {
  const agentsDir = join(settings.dataDir, "agents");
  const reaped = await reapLeftoverGroups(agentsDir);
  if (reaped.killed.length) {
    log({
      level: "warn",
      msg: "killed agent process groups left behind by an earlier daemon",
      pgids: reaped.killed,
    });
  }
  const warmPool = createWarmPool({
    idleTimeout: settings.agentIdleTimeout,
    maxAgents: settings.maxWarmAgents,
    log,
  });
  const runner = createDaemonJobRunner({
    registry: createReaperRegistry(agentsDir),
    sandbox: settings.sandbox,
    terminals: settings.terminals,
    floor: settings.floor,
    warmPool,
    log,
    agentRegistry: {
      dataDir: settings.dataDir,
      registryUrl: settings.registryUrl,
      onNote: (note) => log({ level: "warn", msg: note }),
    },
  });
  return { runner, warmPool };
}

/** How SIGINT/SIGTERM stop the daemon: jobs cancelled, then the connection. */
interface DaemonStop {
  /** Aborted once every job is cancelled and the warm agents are gone. */
  signal: AbortSignal;
  /** The stopping under way, if a signal came. */
  stopping: () => Promise<void> | undefined;
  /** Stops listening for the signals. */
  remove: () => void;
}

function stopOnSignals(jobs: DaemonJobs, log: Logger): DaemonStop {
  const stop = new AbortController();
  let stopping: Promise<void> | undefined;
  const remove = listenForSignals(() => {
    if (stopping) {
      log({ msg: "still stopping: waiting for agent cleanup" });
      return;
    }
    log({ msg: "stopping: cancelling jobs", jobs: jobs.runner.active });
    stopping = jobs.runner.cancelAll(
      new RunnerError(
        "runner.shutting_down",
        "The daemon was stopped on its machine; the run was cancelled. Retry once the daemon is back.",
      ),
    ).then(async () => {
      // Idle agents go too: none outlives the daemon.
      await jobs.warmPool.close();
      // Let the client send each job's run.finished before the socket closes.
      await new Promise((resolve) => setTimeout(resolve, 0));
      stop.abort();
    });
  });
  return { signal: stop.signal, stopping: () => stopping, remove };
}

/** Runs `runner daemon`; returns the exit code. */
export async function daemonCommand(args: string[]): Promise<number> {
  const values = parseDaemonFlags(args);
  if (typeof values === "number") return values;
  let settings: DaemonSettings;
  try {
    settings = await settingsFrom(values);
  } catch (error) {
    return reportFailure(error);
  }
  let token = settings.token;
  const log = createLogger({
    secrets: () => [token],
    level: settings.logLevel,
    format: settings.logFormat,
  });
  warnAboutToken(settings, log);
  const jobs = await startDaemonJobs(settings, log);
  const stop = stopOnSignals(jobs, log);
  log({
    msg: "daemon starting",
    daemon_id: settings.daemonId,
    url: settings.url,
    data_dir: settings.dataDir,
    token: settings.keptTokenDir === undefined
      ? (settings.token ? "given" : "none")
      : `the one runner serve keeps in ${
        daemonTokenPath(settings.keptTokenDir)
      }`,
    sandbox: settings.sandbox.sandbox === "confined"
      ? `confined, network ${settings.sandbox.sandboxNetwork}`
      : "as run.start asks",
    client_terminals: settings.terminals.clientTerminals
      ? `on, at most ${settings.terminals.terminalTimeout} s a command`
      : "off",
  });
  // The ACP client (the SDK and its schemas) loads while the daemon dials
  // the hub, not on the first job's way to its agent's `initialize`.
  preloadAcpClient();
  try {
    await runDaemonClient({
      url: settings.url,
      daemonId: settings.daemonId,
      token: settings.keptTokenDir === undefined
        ? settings.token
        : async () => {
          // Read again each time: the serve may make it after we started.
          token = await readKeptDaemonToken(settings.keptTokenDir!) ?? "";
          return token;
        },
      version: RUNNER_VERSION,
      runJob: jobs.runner.runJob,
      reconnectDelayMs: settings.reconnectDelayMs,
      pingIntervalMs: settings.pingIntervalMs,
      pingTimeoutMs: settings.pingTimeoutMs,
      signal: stop.signal,
      onLog: (entry) =>
        log({ level: entry.level, msg: entry.message, job_id: entry.jobId }),
    });
    await stop.stopping();
  } catch (error) {
    const failure = toRunnerError(error);
    log({ level: "error", msg: failure.message, code: failure.code });
    console.error(`error [${failure.code}]: ${failure.message}`);
    return 1;
  } finally {
    stop.remove();
    await jobs.warmPool.close();
  }
  log({ msg: "daemon stopped" });
  return 0;
}

/** `--registry-url`, checked like the `registry-url` config key. */
function registryUrlFlag(value: unknown): string | undefined {
  if (typeof value !== "string") return undefined;
  if (isRegistryUrl(value)) return value;
  throw invalid(
    `--registry-url: must be an https:// URL, a file:// URL or http:// on a loopback address (got "${value}")`,
  );
}
