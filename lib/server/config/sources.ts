/**
 * Where `runner serve` option values come from: flags, `RUNNER_*`
 * environment variables and an optional JSON config file (flags win, then
 * environment, then file, then built-in defaults).
 *
 * @module
 */

import { parseArgs } from "node:util";
import { DECIMAL_PATTERN, RUN_CONFIG_KEYS } from "../../config.ts";
import { RunnerError } from "../../errors.ts";
import { closestName } from "../../closest_name.ts";

interface ServerKey {
  kind: "string" | "number" | "bool" | "list";
  default?: unknown;
  choices?: readonly string[];
  /** The environment variable, when not `RUNNER_<KEY>`. */
  env?: string;
}

const SERVER_KEYS: Record<string, ServerKey> = {
  "host": { kind: "string", default: "127.0.0.1" },
  "port": { kind: "number", default: 8080 },
  "data-dir": { kind: "string" },
  "api-token": { kind: "string" },
  "api-token-file": { kind: "string" },
  "loopback-without-token": { kind: "bool", default: false },
  "allowed-hosts": { kind: "list", default: [] },
  "allowed-origins": { kind: "list", default: [] },
  "max-connections": { kind: "number", default: 1000 },
  "header-timeout": { kind: "number", default: 10 },
  "request-timeout": { kind: "number", default: 300 },
  "keep-alive-timeout": { kind: "number", default: 5 },
  "env-json-file": { kind: "string" },
  "allow-custom-commands": { kind: "bool", default: false },
  "allow-env-names": { kind: "list", default: [] },
  "max-concurrent-runs": { kind: "number", default: 16 },
  "max-body-mb": { kind: "number", default: 50 },
  "acp-max-buffered-mb": { kind: "number", default: 64 },
  "keepalive-seconds": { kind: "number", default: 15 },
  "log-level": {
    kind: "string",
    default: "info",
    choices: ["debug", "info", "warn", "error"],
  },
  "log-format": { kind: "string", choices: ["json", "text"] },
  "agent-idle-timeout": { kind: "number", default: 300 },
  "max-warm-agents": { kind: "number", default: 16 },
  "retain-runs-days": { kind: "number", default: 30 },
  "retain-runs": { kind: "number", default: 100_000 },
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
  "n8n-merge-ms": { kind: "number", default: 250 },
  "daemon-enabled": { kind: "bool", default: false },
  "daemon-host": { kind: "string", default: "127.0.0.1" },
  "daemon-port": { kind: "number", default: 8766 },
  "daemon-token": { kind: "string" },
  "daemon-token-file": { kind: "string" },
  "daemon-tokens-file": { kind: "string" },
  "daemon-loopback-without-token": { kind: "bool", default: false },
  "daemon-max-jobs-per-id": { kind: "number", default: 16 },
  "daemon-max-connected": { kind: "number", default: 128 },
  "store": { kind: "string", env: "RUNNER_STORE_URL" },
  "replica-id": { kind: "string" },
  "advertise-url": { kind: "string" },
  "cluster-token": { kind: "string" },
  "cluster-token-file": { kind: "string" },
  "lease-seconds": { kind: "number", default: 15 },
};

function envName(key: string): string {
  return SERVER_KEYS[key]?.env ??
    `RUNNER_${key.toUpperCase().replaceAll("-", "_")}`;
}

/** The `config.invalid` failure with `message`. */
export function invalidConfig(message: string): RunnerError {
  return new RunnerError("config.invalid", message);
}

function convertServer(key: string, spec: ServerKey, value: unknown): unknown {
  const text = typeof value === "string" ? value.trim() : value;
  switch (spec.kind) {
    case "string":
      if (typeof text !== "string" && typeof text !== "number") {
        throw invalidConfig(`${key}: must be a string`);
      }
      if (spec.choices && !spec.choices.includes(String(text))) {
        throw invalidConfig(
          `${key}: must be one of ${spec.choices.join(", ")}`,
        );
      }
      return String(text);
    case "number": {
      if (typeof text === "string" && !DECIMAL_PATTERN.test(text)) {
        throw invalidConfig(
          `${key}: must be a number, written in decimal (got "${text}")`,
        );
      }
      const number = typeof text === "number" ? text : Number(text);
      if (!Number.isFinite(number) || number < 0) {
        throw invalidConfig(`${key}: must be a number`);
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
      throw invalidConfig(`${key}: must be true or false`);
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
    throw invalidConfig(
      `--config ${path}: cannot read the file (${
        error instanceof Error ? error.message : error
      }).`,
    );
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw invalidConfig(
      `--config ${path}: not valid JSON. Write one JSON object of option names to values.`,
    );
  }
  if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) {
    throw invalidConfig(
      `--config ${path}: must be one JSON object of option names to values.`,
    );
  }
  return parsed as Record<string, unknown>;
}

/** Parses `runner serve` flags; throws `config.invalid` for unknown or malformed ones. */
export function parseServeFlags(args: string[]): Record<string, unknown> {
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
  try {
    return parseArgs({
      args,
      options: flagOptions,
      strict: true,
      allowPositionals: false,
    }).values;
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    const flag = /'--([^' =]+)/.exec(message)?.[1];
    const meant = (error as { code?: string }).code ===
          "ERR_PARSE_ARGS_UNKNOWN_OPTION" && flag
      ? closestName(flag, Object.keys(flagOptions))
      : undefined;
    throw invalidConfig(
      `${message.split("\n")[0]}${
        meant ? ` (did you mean --${meant}?)` : ""
      } (see runner serve --help)`,
    );
  }
}

/** Where {@linkcode readServeOptions} reads option values. */
export interface ServeOptionSources {
  /** Parsed flags, from {@linkcode parseServeFlags}. */
  flags: Record<string, unknown>;
  /** The environment. */
  env: Record<string, string>;
}

/** Server option values and server-wide run defaults, not yet validated. */
export interface ServeOptionValues {
  /** Every server option, converted, defaults filled in. */
  server: Record<string, unknown>;
  /** The run-config keys given anywhere, as given. */
  runDefaults: Record<string, unknown>;
}

/**
 * Reads every option from the flags, the environment and the config file
 * (`--config` or `RUNNER_CONFIG`), in that order of precedence.
 */
export async function readServeOptions(
  sources: ServeOptionSources,
): Promise<ServeOptionValues> {
  const { flags, env } = sources;
  const filePath = (flags.config as string | undefined) ?? env.RUNNER_CONFIG;
  const file = filePath ? await readConfigFile(filePath) : {};
  for (const key of Object.keys(file)) {
    if (
      !Object.hasOwn(SERVER_KEYS, key) && !Object.hasOwn(RUN_CONFIG_KEYS, key)
    ) {
      throw invalidConfig(
        `--config ${filePath}: unknown option "${key}". See runner serve --help.`,
      );
    }
  }
  const pick = (key: string): unknown =>
    flags[key] ?? env[envName(key)] ?? file[key];

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
  return { server, runDefaults };
}
