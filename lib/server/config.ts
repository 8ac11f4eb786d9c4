/**
 * `runner serve` settings: server options and server-wide run defaults from
 * flags, `RUNNER_*` environment variables and an optional JSON config file
 * (flags win, then environment, then file, then built-in defaults).
 *
 * @module
 */

import { secretsOf } from "../secrets.ts";
import { parseArgs } from "node:util";
import { parseRunConfig, RUN_CONFIG_KEYS, type RunConfig } from "../config.ts";
import { RunnerError } from "../errors.ts";
import { CUSTOM_PROVIDER } from "../providers.ts";
import { defaultDataDir } from "../store/open.ts";

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
  --<config-key> VALUE        server-wide run default, e.g. --provider codex,
                              --workspace /srv/work, --env-json '{"K":"v"}'
`;

interface ServerKey {
  kind: "string" | "number" | "bool" | "list";
  default?: unknown;
  choices?: readonly string[];
}

const SERVER_KEYS: Record<string, ServerKey> = {
  "host": { kind: "string", default: "127.0.0.1" },
  "port": { kind: "number", default: 8080 },
  "data-dir": { kind: "string" },
  "api-token": { kind: "string" },
  "allow-custom-commands": { kind: "bool", default: false },
  "allow-env-names": { kind: "list", default: [] },
  "max-concurrent-runs": { kind: "number", default: 16 },
  "max-body-mb": { kind: "number", default: 50 },
  "n8n-auth": {
    kind: "string",
    default: "none",
    choices: ["none", "basic", "header", "jwt"],
  },
  "n8n-auth-user": { kind: "string" },
  "n8n-auth-password": { kind: "string" },
  "n8n-auth-header-name": { kind: "string" },
  "n8n-auth-header-value": { kind: "string" },
  "n8n-jwt-secret": { kind: "string" },
  "n8n-output-key": { kind: "string", default: "response" },
  "n8n-wait-seconds": { kind: "number", default: 60 },
  "daemon-enabled": { kind: "bool", default: false },
  "daemon-host": { kind: "string", default: "127.0.0.1" },
  "daemon-port": { kind: "number", default: 8766 },
  "daemon-token": { kind: "string" },
  "daemon-token-file": { kind: "string" },
};

function envName(key: string): string {
  return `RUNNER_${key.toUpperCase().replaceAll("-", "_")}`;
}

function invalid(message: string): RunnerError {
  return new RunnerError("config.invalid", message);
}

function convertServer(key: string, spec: ServerKey, value: unknown): unknown {
  const text = typeof value === "string" ? value.trim() : value;
  switch (spec.kind) {
    case "string":
      if (typeof text !== "string" && typeof text !== "number") {
        throw invalid(`${key}: must be a string`);
      }
      if (spec.choices && !spec.choices.includes(String(text))) {
        throw invalid(`${key}: must be one of ${spec.choices.join(", ")}`);
      }
      return String(text);
    case "number": {
      const number = typeof text === "number" ? text : Number(text);
      if (!Number.isFinite(number) || number < 0 || text === "") {
        throw invalid(`${key}: must be a number`);
      }
      return number;
    }
    case "bool":
      if (typeof text === "boolean") return text;
      if (["true", "1", "yes", "on", ""].includes(String(text).toLowerCase())) {
        return true;
      }
      if (["false", "0", "no", "off"].includes(String(text).toLowerCase())) {
        return false;
      }
      throw invalid(`${key}: must be true or false`);
    case "list":
      if (Array.isArray(text)) return text.map(String);
      return String(text).split(",").map((item) => item.trim()).filter(Boolean);
  }
}

async function readConfigFile(path: string): Promise<Record<string, unknown>> {
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (error) {
    throw invalid(
      `--config ${path}: cannot read the file (${
        error instanceof Error ? error.message : error
      }).`,
    );
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw invalid(
      `--config ${path}: not valid JSON. Write one JSON object of option names to values.`,
    );
  }
  if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) {
    throw invalid(
      `--config ${path}: must be one JSON object of option names to values.`,
    );
  }
  return parsed as Record<string, unknown>;
}

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
  const flagOptions: Record<string, { type: "string" | "boolean" }> = {
    config: { type: "string" },
  };
  for (const [key, spec] of Object.entries(SERVER_KEYS)) {
    flagOptions[key] = { type: spec.kind === "bool" ? "boolean" : "string" };
  }
  for (const key of Object.keys(RUN_CONFIG_KEYS)) {
    flagOptions[key] = { type: "string" };
  }
  flagOptions.help = { type: "boolean" };
  let values: Record<string, unknown>;
  try {
    values = parseArgs({
      args,
      options: flagOptions,
      strict: true,
      allowPositionals: false,
    }).values;
  } catch (error) {
    throw invalid(
      `${
        error instanceof Error ? error.message : error
      } (see runner serve --help)`,
    );
  }
  if (values.help) return "help";
  const env = options.env ?? Deno.env.toObject();
  const filePath = (values.config as string | undefined) ?? env.RUNNER_CONFIG;
  const file = filePath ? await readConfigFile(filePath) : {};
  for (const key of Object.keys(file)) {
    if (!(key in SERVER_KEYS) && !(key in RUN_CONFIG_KEYS)) {
      throw invalid(
        `--config ${filePath}: unknown option "${key}". See runner serve --help.`,
      );
    }
  }
  const pick = (key: string): unknown =>
    values[key] ?? env[envName(key)] ?? file[key];

  const server: Record<string, unknown> = {};
  for (const [key, spec] of Object.entries(SERVER_KEYS)) {
    const value = pick(key);
    server[key] = value === undefined
      ? spec.default
      : convertServer(key, spec, value);
  }
  const runDefaults: Record<string, unknown> = {};
  for (const key of Object.keys(RUN_CONFIG_KEYS)) {
    const value = pick(key);
    if (value !== undefined) runDefaults[key] = value;
  }
  parseRunDefaults(runDefaults);

  const config: ServeConfig = {
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
  };
  validateServeConfig(config);
  return config;
}

async function daemonToken(
  server: Record<string, unknown>,
): Promise<string | undefined> {
  const file = server["daemon-token-file"] as string | undefined;
  if (!file) return (server["daemon-token"] as string | undefined) || undefined;
  try {
    return (await Deno.readTextFile(file)).replace(/\r?\n$/, "") || undefined;
  } catch (error) {
    throw invalid(
      `--daemon-token-file ${file}: cannot read the file (${
        error instanceof Error ? error.message : error
      }).`,
    );
  }
}

function validateServeConfig(config: ServeConfig): void {
  if (!Number.isInteger(config.port) || config.port > 65535) {
    throw invalid(`port: must be a port number 0-65535 (got ${config.port}).`);
  }
  if (!isLoopbackHost(config.host) && !config.apiToken) {
    throw invalid(
      `--host ${config.host} accepts connections from other machines, so an API token is required. ` +
        `Pass --api-token (or set RUNNER_API_TOKEN), e.g. --api-token "$(runner token)", or listen on --host 127.0.0.1.`,
    );
  }
  if (config.maxConcurrentRuns < 1) {
    throw invalid("max-concurrent-runs: must be at least 1.");
  }
  if (config.maxBodyMb <= 0) {
    throw invalid("max-body-mb: must be greater than 0.");
  }
  const n8n = config.n8n;
  if (n8n.auth === "basic" && (!n8n.user || !n8n.password)) {
    throw invalid(
      "--n8n-auth basic needs --n8n-auth-user and --n8n-auth-password.",
    );
  }
  if (n8n.auth === "header" && (!n8n.headerName || !n8n.headerValue)) {
    throw invalid(
      "--n8n-auth header needs --n8n-auth-header-name and --n8n-auth-header-value.",
    );
  }
  if (n8n.auth === "jwt" && !n8n.jwtSecret) {
    throw invalid(
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
    ...secretsOf({ envJson: defaults.envJson }),
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
