/**
 * `runner serve` settings: server options and server-wide run defaults from
 * flags, `RUNNER_*` environment variables and an optional JSON config file
 * (flags win, then environment, then file, then built-in defaults).
 *
 * @module
 */

import { secretsOf } from "../secrets.ts";
import { parseRunConfig, type RunConfig } from "../config.ts";
import { CUSTOM_PROVIDER } from "../providers.ts";
import { defaultDataDir } from "../store/open.ts";
import {
  invalidConfig,
  parseServeFlags,
  readServeOptions,
  type ServeOptionValues,
} from "./config_sources.ts";

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
  /** HS256 secret for JWT auth. */
  jwtSecret?: string;
  /** The key holding the answer text in `stream=false` replies. */
  outputKey: string;
  /** How long a webhook call waits for the conversation's previous run, in seconds. */
  waitSeconds: number;
}

/** Everything `runner serve` is configured with. */
export interface ServeConfig {
  /** The listen address. */
  host: string;
  /** The listen port (0: any free port). */
  port: number;
  /** Where the store and reaper records live. */
  dataDir: string;
  /** The bearer token required on `/v1` (required off loopback). */
  apiToken?: string;
  /** Whether callers may set `acp-command`, `provider=custom` and other command-bearing keys. */
  allowCustomCommands: boolean;
  /** env-json names callers may set. */
  allowEnvNames: string[];
  /** Active runs at most. */
  maxConcurrentRuns: number;
  /** Request bodies at most this many MiB. */
  maxBodyMb: number;
  /** The n8n webhook settings. */
  n8n: N8nSettings;
  /** Server-wide run defaults (kebab-case run-config keys). */
  runDefaults: Record<string, unknown>;
  /** The daemon hub (coding-relay-v1 WebSocket listener). */
  daemon: DaemonHubSettings;
  /** Fleet settings, when `--store` names a shared PostgreSQL database. */
  fleet?: FleetSettings;
}

/** How this replica joins a fleet sharing one PostgreSQL store. */
export interface FleetSettings {
  /** The PostgreSQL URL (`--store`, `RUNNER_STORE_URL`). */
  storeUrl: string;
  /** This replica's id (`--replica-id`, default the host name). */
  replicaId: string;
  /** Where other replicas reach this one (`--advertise-url`). */
  advertiseUrl: string;
  /** The secret replicas send each other (`--cluster-token`). */
  clusterToken: string;
  /** The replica lease, in milliseconds (`--lease-seconds`). */
  leaseMs: number;
}

/** Daemon hub settings of `runner serve`. */
export interface DaemonHubSettings {
  /** Whether the hub listens. */
  enabled: boolean;
  /** Listen address (default 127.0.0.1). */
  host: string;
  /** Listen port (default 8766; 0 = any free port). */
  port: number;
  /** The shared secret daemons must send (required off loopback). */
  token?: string;
}

/** Help text of `runner serve`. */
export const SERVE_HELP = `Usage: runner serve [options]

Runs the HTTP service: the runs API (/v1/runs), the n8n webhook
(/v1/webhooks/n8n), /healthz, /metrics and /openapi.json. See docs/http-api.md.

Options (each also RUNNER_<NAME> in the environment, or a key of --config):
  --host ADDR                 listen address (default 127.0.0.1)
  --port N                    listen port (default 8080; 0 = any free port)
  --data-dir DIR              store and agent records (default: the user data dir)
  --api-token TOKEN           bearer token for /v1 (required unless host is loopback)
  --config FILE               JSON file of these options and run-config keys
  --allow-custom-commands     let callers set acp-command, provider=custom,
                              mcp-servers-json and ssh command options
  --allow-env-names A,B       env-json names callers may set (default none)
  --max-concurrent-runs N     active runs at most (default 16)
  --max-body-mb N             request body limit (default 50)
  --n8n-auth MODE             none | basic | header | jwt (default none)
  --n8n-auth-user USER        basic auth user
  --n8n-auth-password PASS    basic auth password
  --n8n-auth-header-name H    header auth name
  --n8n-auth-header-value V   header auth value
  --n8n-jwt-secret SECRET     HS256 secret for jwt auth
  --n8n-output-key KEY        answer key for stream=false (default response)
  --n8n-wait-seconds N        wait for a busy conversation (default 60)
  --daemon-enabled            listen for runner daemons (coding-relay-v1)
  --daemon-host ADDR          daemon hub address (default 127.0.0.1)
  --daemon-port N             daemon hub port (default 8766)
  --daemon-token TOKEN        shared secret daemons must send (required off loopback;
                              make one with runner token)
  --daemon-token-file FILE    read the daemon token from a file
  --store postgres://…        share runs, sessions, events, leases and daemon
                              fences with other replicas in PostgreSQL
                              (RUNNER_STORE_URL; default: SQLite in --data-dir)
  --replica-id ID             this replica's id in the fleet (default: host name)
  --advertise-url URL         where other replicas reach this one
                              (default http://HOST:PORT)
  --cluster-token TOKEN       secret replicas send each other (required with --store)
  --lease-seconds N           replica and conversation lease (default 15)
  --<config-key> VALUE        server-wide run default, e.g. --provider codex,
                              --workspace /srv/work, --env-json '{"K":"v"}'
`;

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
    apiToken: (server["api-token"] as string | undefined) || undefined,
    allowCustomCommands: server["allow-custom-commands"] as boolean,
    allowEnvNames: server["allow-env-names"] as string[],
    maxConcurrentRuns: server["max-concurrent-runs"] as number,
    maxBodyMb: server["max-body-mb"] as number,
    n8n: {
      auth: server["n8n-auth"] as N8nAuthMode,
      user: server["n8n-auth-user"] as string | undefined,
      password: server["n8n-auth-password"] as string | undefined,
      headerName: server["n8n-auth-header-name"] as string | undefined,
      headerValue: server["n8n-auth-header-value"] as string | undefined,
      jwtSecret: server["n8n-jwt-secret"] as string | undefined,
      outputKey: server["n8n-output-key"] as string,
      waitSeconds: server["n8n-wait-seconds"] as number,
    },
    runDefaults,
    daemon: {
      enabled: server["daemon-enabled"] as boolean,
      host: server["daemon-host"] as string,
      port: server["daemon-port"] as number,
      token: await daemonToken(server),
    },
    fleet: fleetSettings(server),
  };
}

/** The fleet settings, when `--store` is given. */
function fleetSettings(
  server: Record<string, unknown>,
): FleetSettings | undefined {
  const storeUrl = (server.store as string | undefined)?.trim();
  if (!storeUrl) return undefined;
  if (!/^postgres(ql)?:\/\//.test(storeUrl)) {
    throw invalidConfig(
      "--store must be a postgres:// URL (leave it out for the embedded SQLite store).",
    );
  }
  const clusterToken = server["cluster-token"] as string | undefined;
  if (!clusterToken) {
    throw invalidConfig(
      '--store joins a fleet: give every replica the same --cluster-token (e.g. "$(runner token)").',
    );
  }
  const leaseSeconds = server["lease-seconds"] as number;
  if (!(leaseSeconds > 0) || leaseSeconds > 3600) {
    throw invalidConfig(
      "lease-seconds: must be greater than 0 and at most 3600.",
    );
  }
  return {
    storeUrl,
    replicaId: (server["replica-id"] as string | undefined) || hostName(),
    advertiseUrl: advertiseUrl(server),
    clusterToken,
    leaseMs: Math.round(leaseSeconds * 1000),
  };
}

/** This machine's name, without needing --allow-sys. */
function hostName(): string {
  const fromEnv = Deno.env.get("HOSTNAME")?.trim();
  if (fromEnv) return fromEnv;
  try {
    return Deno.readTextFileSync("/etc/hostname").trim() || "runner";
  } catch {
    return "runner";
  }
}

function advertiseUrl(server: Record<string, unknown>): string {
  const given = server["advertise-url"] as string | undefined;
  if (given) {
    if (!/^https?:\/\//.test(given)) {
      throw invalidConfig(
        "--advertise-url must be an http:// or https:// URL.",
      );
    }
    return given.replace(/\/+$/, "");
  }
  const host = String(server.host);
  const port = server.port as number;
  if (port === 0 || ["0.0.0.0", "::", "[::]"].includes(host)) {
    throw invalidConfig(
      "--store needs --advertise-url (the URL other replicas reach this one at) when --host is a wildcard or --port is 0.",
    );
  }
  return `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
}

async function daemonToken(
  server: Record<string, unknown>,
): Promise<string | undefined> {
  const file = server["daemon-token-file"] as string | undefined;
  if (!file) return (server["daemon-token"] as string | undefined) || undefined;
  try {
    return (await Deno.readTextFile(file)).replace(/\r?\n$/, "") || undefined;
  } catch (error) {
    throw invalidConfig(
      `--daemon-token-file ${file}: cannot read the file (${
        error instanceof Error ? error.message : error
      }).`,
    );
  }
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
      "--n8n-auth jwt needs --n8n-jwt-secret (the HS256 signing secret).",
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
    ...secretsOf({ envJson: defaults.envJson }),
  ].filter((value): value is string => Boolean(value));
}

/** The password in a store URL, if any. */
function storePassword(url: string | undefined): string | undefined {
  if (!url) return undefined;
  try {
    return decodeURIComponent(new URL(url).password) || undefined;
  } catch {
    return undefined;
  }
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
