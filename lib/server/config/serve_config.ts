/**
 * `runner serve` settings: server options and server-wide run defaults from
 * flags, `RUNNER_*` environment variables and an optional JSON config file
 * (flags win, then environment, then file, then built-in defaults).
 *
 * `server/config/` owns the settings of `runner serve` from its sources to
 * one checked {@linkcode ServeConfig}: where values come from (`sources.ts`),
 * the fleet settings (`fleet.ts`), the help text (`help.ts`) and this file,
 * which reads every option. The run config it defaults is `lib/config.ts`'s.
 *
 * @module
 */

import type { LogFormat, LogLevel } from "../../log.ts";
import { secretsOf } from "../../secrets.ts";
import { parseRunConfig, type RunConfig } from "../../config.ts";
import { CUSTOM_PROVIDER } from "../../providers.ts";
import { defaultDataDir } from "../../store/data_dir.ts";
import type { RetentionSettings } from "../retention.ts";
import {
  checkWarmPoolOptions,
  type WarmPoolSettings,
} from "../../run/warm/pool.ts";
import {
  invalidConfig,
  parseServeFlags,
  readServeOptions,
  type ServeOptionValues,
} from "./sources.ts";
import { type FleetSettings, fleetSettings, storePassword } from "./fleet.ts";

export type { FleetSettings };
export { SERVE_HELP } from "./help.ts";

/** How the n8n webhook authenticates callers. */
export type N8nAuthMode = "none" | "basic" | "header" | "jwt";

/** n8n webhook settings. */
export interface N8nSettings {
  /** The authentication mode. */
  auth: N8nAuthMode;
  /** Basic-auth user. */
  user?: string;
  /** Basic-auth password. */
  password?: string;
  /** Header-auth header name. */
  headerName?: string;
  /** Header-auth header value. */
  headerValue?: string;
  /** The shared secret JWTs are signed with (HS256, HS384 or HS512). */
  jwtSecret?: string;
  /** The key holding the answer text in `stream=false` replies. */
  outputKey: string;
  /** How long a webhook call waits for the conversation's previous run, in seconds. */
  waitSeconds: number;
  /** Deltas arriving within this many ms of the last item are sent as one item. */
  mergeMs: number;
}

/** Everything `runner serve` is configured with. */
export interface ServeConfig {
  /** The listen address. */
  host: string;
  /** The listen port (0: any free port). */
  port: number;
  /** Where the store and reaper records live. */
  dataDir: string;
  /**
   * The bearer token every route but the open ones requires (required off
   * loopback; on loopback `runner serve` makes one in the data dir when none
   * is given, see `cli/serve/api_token.ts`).
   */
  apiToken?: string;
  /**
   * Where the API token came from: `given` (`--api-token`, its file or the
   * environment) or `data-dir` (the token `runner serve` made and keeps in
   * the data dir).
   */
  apiTokenSource?: "given" | "data-dir";
  /**
   * `--loopback-without-token`: on loopback with no API token, any local
   * process may call the API (the old behaviour, an operator's choice).
   */
  loopbackWithoutToken: boolean;
  /** Whether callers may set `acp-command`, `provider=custom` and other command-bearing keys. */
  allowCustomCommands: boolean;
  /** env-json names callers may set. */
  allowEnvNames: string[];
  /** Active runs at most. */
  maxConcurrentRuns: number;
  /** Request bodies at most this many MiB. */
  maxBodyMb: number;
  /** MiB of output an `/acp` connection holds for a client that does not read it. */
  acpMaxBufferedMb: number;
  /** Seconds between keep-alives on a silent stream (SSE, NDJSON, n8n). */
  keepaliveSeconds: number;
  /** The least severe log level written. */
  logLevel: LogLevel;
  /** The log line format; undefined: text on a terminal, else JSON. */
  logFormat?: LogFormat;
  /** The n8n webhook settings. */
  n8n: N8nSettings;
  /** Server-wide run defaults (kebab-case run-config keys). */
  runDefaults: Record<string, unknown>;
  /** The daemon hub (coding-relay-v1 WebSocket listener). */
  daemon: DaemonHubSettings;
  /** `Host` names accepted besides IP addresses, localhost and the listen name. */
  allowedHosts: string[];
  /** Browser origins accepted besides the server's own. */
  allowedOrigins: string[];
  /** Connection limits of the HTTP listener (and the hub's). */
  limits: ListenerLimits;
  /** Fleet settings, when `--store` names a shared PostgreSQL database. */
  fleet?: FleetSettings;
  /** The warm pool's bounds (`agent-idle-timeout`, `max-warm-agents`; `docs/runs.md`). */
  warmAgents: WarmPoolSettings;
  /** Which finished runs are kept (`retain-runs-days`, `retain-runs`; `docs/runs.md`). */
  retention: RetentionSettings;
}

/** Connection limits, in the units of the flags. */
export interface ListenerLimits {
  /** Open connections at most (`--max-connections`). */
  maxConnections: number;
  /** Seconds to send a request head (`--header-timeout`). */
  headerTimeout: number;
  /** Seconds to send a whole request (`--request-timeout`). */
  requestTimeout: number;
  /** Idle seconds between keep-alive requests (`--keep-alive-timeout`). */
  keepAliveTimeout: number;
}

/** Daemon hub settings of `runner serve`. */
export interface DaemonHubSettings {
  /** Whether the hub listens. */
  enabled: boolean;
  /** Listen address (default 127.0.0.1). */
  host: string;
  /** Listen port (default 8766; 0 = any free port). */
  port: number;
  /**
   * The shared secret daemons must send (required off loopback; on loopback
   * `runner serve` makes one in the data dir when no token is given, see
   * `cli/serve/daemon_token.ts`).
   */
  token?: string;
  /**
   * Where the shared token came from: `given` (`--daemon-token`, its file or
   * the environment) or `data-dir` (the one `runner serve` made and keeps).
   */
  tokenSource?: "given" | "data-dir";
  /** Per-daemon tokens by daemon ID (`--daemon-tokens-file`). */
  tokens: Record<string, string>;
  /**
   * `--daemon-loopback-without-token`: on loopback with no daemon token, any
   * local process may connect as any daemon ID (an operator's choice).
   */
  loopbackWithoutToken: boolean;
  /** Jobs one daemon ID may run at once. */
  maxJobsPerId: number;
  /** Daemons the hub keeps at once, connected plus fenced. */
  maxConnected: number;
}

/** The most daemons `--daemon-max-connected` may let one hub keep. */
export const MAX_CONNECTED_DAEMONS = 10_000;

/** Whether `host` only accepts connections from this machine. */
export function isLoopbackHost(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, "").toLowerCase();
  return bare === "localhost" || bare === "::1" ||
    /^127(\.\d{1,3}){3}$/.test(bare);
}

/** Options for {@linkcode loadServeConfig}; tests pass their own environment. */
export interface LoadServeConfigOptions {
  /** The environment (defaults to `Deno.env.toObject()`). */
  env?: Record<string, string>;
}

/**
 * Parses `runner serve` arguments, environment and config file into a
 * validated {@linkcode ServeConfig}; returns `"help"` for `--help`.
 *
 * @throws {RunnerError} `config.invalid` for unknown or bad options, a
 * non-loopback host without an API token, or incomplete n8n auth settings.
 */
export async function loadServeConfig(
  args: string[],
  options: LoadServeConfigOptions = {},
): Promise<ServeConfig | "help"> {
  const flags = parseServeFlags(args);
  if (flags.help) return "help";
  const env = options.env ?? Deno.env.toObject();
  const { server, runDefaults } = await readServeOptions({ flags, env });
  parseRunDefaults(runDefaults);
  const envJsonFile = server["env-json-file"] as string | undefined;
  if (envJsonFile) {
    runDefaults["env-json"] = await readSecretFile(
      "--env-json-file",
      envJsonFile,
    );
  }
  const config = await buildServeConfig({ server, runDefaults, env });
  validateServeConfig(config);
  return config;
}

/** What {@linkcode buildServeConfig} assembles a config from. */
interface ServeConfigParts extends ServeOptionValues {
  /** The environment, for the default data directory. */
  env: Record<string, string>;
}

/** The config from its parts; reads the daemon token file if one is named. */
async function buildServeConfig(parts: ServeConfigParts): Promise<ServeConfig> {
  const { server, runDefaults, env } = parts;
  return {
    host: server.host as string,
    port: server.port as number,
    dataDir: (server["data-dir"] as string | undefined) ??
      defaultDataDir({ env: (name) => env[name] }),
    ...apiTokenFields(await secretOption(server, "api-token")),
    loopbackWithoutToken: server["loopback-without-token"] as boolean,
    allowCustomCommands: server["allow-custom-commands"] as boolean,
    allowEnvNames: server["allow-env-names"] as string[],
    maxConcurrentRuns: server["max-concurrent-runs"] as number,
    maxBodyMb: server["max-body-mb"] as number,
    acpMaxBufferedMb: server["acp-max-buffered-mb"] as number,
    keepaliveSeconds: server["keepalive-seconds"] as number,
    logLevel: server["log-level"] as LogLevel,
    logFormat: server["log-format"] as LogFormat | undefined,
    n8n: {
      auth: server["n8n-auth"] as N8nAuthMode,
      user: server["n8n-auth-user"] as string | undefined,
      password: server["n8n-auth-password"] as string | undefined,
      headerName: server["n8n-auth-header-name"] as string | undefined,
      headerValue: server["n8n-auth-header-value"] as string | undefined,
      jwtSecret: server["n8n-jwt-secret"] as string | undefined,
      outputKey: server["n8n-output-key"] as string,
      waitSeconds: server["n8n-wait-seconds"] as number,
      mergeMs: server["n8n-merge-ms"] as number,
    },
    runDefaults,
    daemon: {
      enabled: server["daemon-enabled"] as boolean,
      host: server["daemon-host"] as string,
      port: server["daemon-port"] as number,
      ...daemonTokenFields(await secretOption(server, "daemon-token")),
      tokens: await daemonTokens(server["daemon-tokens-file"] as string),
      loopbackWithoutToken: server["daemon-loopback-without-token"] as boolean,
      maxJobsPerId: server["daemon-max-jobs-per-id"] as number,
      maxConnected: server["daemon-max-connected"] as number,
    },
    allowedHosts: server["allowed-hosts"] as string[],
    allowedOrigins: server["allowed-origins"] as string[],
    limits: {
      maxConnections: server["max-connections"] as number,
      headerTimeout: server["header-timeout"] as number,
      requestTimeout: server["request-timeout"] as number,
      keepAliveTimeout: server["keep-alive-timeout"] as number,
    },
    fleet: fleetSettings(server, await secretOption(server, "cluster-token")),
    warmAgents: {
      idleTimeout: server["agent-idle-timeout"] as number,
      maxAgents: server["max-warm-agents"] as number,
    },
    retention: {
      maxAgeDays: server["retain-runs-days"] as number,
      maxRuns: server["retain-runs"] as number,
    },
  };
}

/** The API token fields of a config: the token and, when given, its source. */
function apiTokenFields(
  token: string | undefined,
): Pick<ServeConfig, "apiToken" | "apiTokenSource"> {
  return token ? { apiToken: token, apiTokenSource: "given" } : {};
}

/** The daemon token fields of a config: the token and, when given, its source. */
function daemonTokenFields(
  token: string | undefined,
): Pick<DaemonHubSettings, "token" | "tokenSource"> {
  return token ? { token, tokenSource: "given" } : {};
}

/** A secret option: `<key>-file`'s content wins over `<key>` itself. */
async function secretOption(
  server: Record<string, unknown>,
  key: string,
): Promise<string | undefined> {
  const file = server[`${key}-file`] as string | undefined;
  if (!file) return (server[key] as string | undefined) || undefined;
  return await readSecretFile(`--${key}-file`, file) || undefined;
}

/** A file's text without one trailing newline; `config.invalid` when unreadable. */
async function readSecretFile(flag: string, path: string): Promise<string> {
  try {
    return (await Deno.readTextFile(path)).replace(/\r?\n$/, "");
  } catch (error) {
    throw invalidConfig(
      `${flag} ${path}: cannot read the file (${
        error instanceof Error ? error.message : error
      }).`,
    );
  }
}

/** The per-daemon tokens of `--daemon-tokens-file`: one JSON object of ID to token. */
async function daemonTokens(
  path: string | undefined,
): Promise<Record<string, string>> {
  if (!path) return {};
  const text = await readSecretFile("--daemon-tokens-file", path);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  if (
    !parsed || typeof parsed !== "object" || Array.isArray(parsed) ||
    Object.values(parsed).some((token) => typeof token !== "string")
  ) {
    throw invalidConfig(
      `--daemon-tokens-file ${path}: must be one JSON object of daemon ID to token, e.g. {"laptop-1": "<runner token>"}.`,
    );
  }
  return parsed as Record<string, string>;
}

function validateServeConfig(config: ServeConfig): void {
  if (!Number.isInteger(config.port) || config.port > 65535) {
    throw invalidConfig(
      `port: must be a port number 0-65535 (got ${config.port}).`,
    );
  }
  if (!isLoopbackHost(config.host) && !config.apiToken) {
    throw invalidConfig(
      `--host ${config.host} accepts connections from other machines, so an API token is required. ` +
        `Pass --api-token (or set RUNNER_API_TOKEN), e.g. --api-token "$(runner token)", or listen on --host 127.0.0.1.`,
    );
  }
  if (config.maxConcurrentRuns < 1) {
    throw invalidConfig("max-concurrent-runs: must be at least 1.");
  }
  if (config.maxBodyMb <= 0) {
    throw invalidConfig("max-body-mb: must be greater than 0.");
  }
  if (!(config.acpMaxBufferedMb > 0)) {
    throw invalidConfig("acp-max-buffered-mb: must be greater than 0.");
  }
  checkWarmPoolOptions(config.warmAgents);
  validateRetention(config.retention);
  validateLimits(config);
  if (config.keepaliveSeconds <= 0) {
    throw invalidConfig("keepalive-seconds: must be greater than 0.");
  }
  const n8n = config.n8n;
  if (n8n.auth === "basic" && (!n8n.user || !n8n.password)) {
    throw invalidConfig(
      "--n8n-auth basic needs --n8n-auth-user and --n8n-auth-password.",
    );
  }
  if (n8n.auth === "header" && (!n8n.headerName || !n8n.headerValue)) {
    throw invalidConfig(
      "--n8n-auth header needs --n8n-auth-header-name and --n8n-auth-header-value.",
    );
  }
  if (n8n.auth === "jwt" && !n8n.jwtSecret) {
    throw invalidConfig(
      "--n8n-auth jwt needs --n8n-jwt-secret (the HS256/HS384/HS512 signing secret).",
    );
  }
}

function validateRetention({ maxAgeDays, maxRuns }: RetentionSettings): void {
  if (maxAgeDays > 36_500) {
    throw invalidConfig(
      "retain-runs-days: must be at most 36500 days (0 keeps runs forever).",
    );
  }
  if (!Number.isInteger(maxRuns)) {
    throw invalidConfig(
      "retain-runs: must be a whole number of runs (0 keeps every run).",
    );
  }
}

function validateLimits(config: ServeConfig): void {
  const { limits, daemon } = config;
  if (!Number.isInteger(limits.maxConnections) || limits.maxConnections < 1) {
    throw invalidConfig("max-connections: must be a whole number, at least 1.");
  }
  for (
    const [key, value] of [
      ["header-timeout", limits.headerTimeout],
      ["request-timeout", limits.requestTimeout],
      ["keep-alive-timeout", limits.keepAliveTimeout],
    ] as const
  ) {
    if (value <= 0 || value > 86_400) {
      throw invalidConfig(
        `${key}: must be more than 0 and at most 86400 seconds.`,
      );
    }
  }
  if (!Number.isInteger(daemon.maxJobsPerId) || daemon.maxJobsPerId < 1) {
    throw invalidConfig(
      "daemon-max-jobs-per-id: must be a whole number, at least 1.",
    );
  }
  if (
    !Number.isInteger(daemon.maxConnected) || daemon.maxConnected < 1 ||
    daemon.maxConnected > MAX_CONNECTED_DAEMONS
  ) {
    throw invalidConfig(
      `daemon-max-connected: must be a whole number from 1 to ${MAX_CONNECTED_DAEMONS}.`,
    );
  }
}

/** The secrets in a serve config: tokens, passwords and default env-json values. */
export function serveSecrets(config: ServeConfig): string[] {
  const defaults = parseRunDefaults(config.runDefaults);
  return [
    config.apiToken,
    config.n8n.password,
    config.n8n.headerValue,
    config.n8n.jwtSecret,
    config.daemon.token,
    config.fleet?.clusterToken,
    storePassword(config.fleet?.storeUrl),
    ...Object.values(config.daemon.tokens),
    ...secretsOf({
      envJson: defaults.envJson,
      secretNames: defaults.secretEnvNames,
    }),
  ].filter((value): value is string => Boolean(value));
}

/**
 * Validates server-wide run defaults, which may lack the keys callers supply
 * (provider, workspace, …), and returns them parsed over placeholders.
 *
 * @throws {RunnerError} `config.invalid` for unknown keys or bad values.
 */
export function parseRunDefaults(defaults: Record<string, unknown>): RunConfig {
  return parseRunConfig({
    provider: CUSTOM_PROVIDER,
    workspace: "/",
    "ssh-target": "x",
    "daemon-id": "x",
  }, defaults);
}
