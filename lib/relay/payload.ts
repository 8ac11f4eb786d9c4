/**
 * The `run.start` payload of coding-relay-v1 in the Python ACP plugin's
 * shape (`prompt_text`, `input`, `input_text`, snake_case `config`): built by
 * our hub from a run config, and mapped back onto a local run config by our
 * daemon. The daemon also takes kebab-case keys and ignores keys it does not
 * know, because other hubs send extra ones (`daemon-id`, `model`, …).
 *
 * @module
 */

import type { McpServer } from "@agentclientprotocol/sdk";
import { parseRunConfig, RUN_CONFIG_KEYS, type RunConfig } from "../config.ts";
import { RunnerError } from "../errors.ts";
import type { RunInput } from "../run/prompt.ts";
import { runInputOf } from "./input.ts";
import {
  type Json,
  type JsonObject,
  MCP_REQUEST_TIMEOUT_MS,
} from "../relay.ts";
import { quoteCommand } from "../agent/shell_words.ts";
import { registryIdOf, resolveProvider } from "../providers.ts";
import {
  SANDBOX_NETWORKS,
  type SandboxNetwork,
  widerNetwork,
} from "../agent/sandbox_network.ts";
import {
  executableArgv,
  fallbackArgv,
  PRESET_PINS,
} from "../agent/preset_pins.ts";

/** What the hub puts into one `run.start` payload. */
export interface RunStartSpec {
  /** The run id. */
  runId: string;
  /** The input of this job (the first input, or a follow-up). */
  input: RunInput;
  /** The run's config. */
  config: RunConfig;
  /** The session to resume, if any. */
  storedSessionId?: string;
  /**
   * The session config values the conversation remembers (`{}`: none yet),
   * sent as the runner's own `stored_session_config`; left out when the hub
   * keeps none for the run (no conversation).
   */
  sessionMemory?: Record<string, unknown>;
  /** Overrides `config.reuseSession` (follow-ups continue the run's session). */
  reuseSession?: boolean;
  /** MCP servers for the agent besides the daemon's proxy. */
  mcpServers?: McpServer[];
  /** MCP request timeout on the daemon, in seconds (default 60). */
  mcpRequestTimeout?: number;
  /** Text put before the prompt in `prompt_text` (the run-scope note). */
  promptPrefix?: string;
  /**
   * Whether the daemon takes `permission_decision: "ask"` (it confirmed the
   * `permission.ask` capability); otherwise `ask` is sent as the fallback.
   */
  askAllowed?: boolean;
  /**
   * Whether the daemon sends the agent's live `session/update`s as
   * `run.update` frames (it confirmed the `session.update` capability and
   * the run's caller wants them).
   */
  sessionUpdates?: boolean;
}

/** Engine keys beyond the plugin's list, sent only when not at their default. */
const EXTRA_KEYS = [
  "cancel-grace",
  "late-update-ms",
  "delta-coalesce-ms",
  "replay-quiet-ms",
  "secret-env-names",
  "max-message-mb",
  "max-attachment-mb",
  "max-prompt-mb",
  "fs-read",
  "fs-write",
  "client-terminals",
  "terminal-timeout",
  "terminal-output-bytes",
  "permission-timeout",
  "permission-fallback",
  "sandbox",
  "sandbox-network",
  "model",
  "mode",
  "session-config-json",
  "permission-rules-json",
  "auth-method",
] as const;

function isEmptyObject(value: unknown): boolean {
  return typeof value === "object" && value !== null &&
    Object.keys(value).length === 0;
}

/**
 * Builds the `run.start` payload (snake_case, the Python plugin's keys).
 * `acp_command` is always the resolved command (a preset's default or the
 * custom one), as LangBot's hub sends it: `daemon.py` needs it. Throws the
 * provider's error for an unknown provider or `custom` without a command.
 */
export function buildRunStartPayload(spec: RunStartSpec): JsonObject {
  const { config } = spec;
  // A registry agent is named, not commanded: the daemon installs it for
  // its own platform (`docs/registry.md`).
  const registryId = config.acpCommand?.trim()
    ? undefined
    : registryIdOf(config.provider);
  const commandText = registryId === undefined
    ? resolveProvider({
      provider: config.provider,
      acpCommand: config.acpCommand,
    }).commandText
    : undefined;
  const text = spec.input.text ?? "";
  const workspace = config.workspace ?? null;
  const payloadConfig: JsonObject = {
    provider: config.provider,
    ...(commandText === undefined ? {} : { acp_command: commandText }),
    ...(config.providerVersion
      ? { provider_version: config.providerVersion }
      : {}),
    workspace,
    cwd: workspace,
    session_cwd: config.sessionCwd ?? workspace,
    env: { ...config.envJson },
    timeout: config.timeout,
    startup_timeout: config.startupTimeout,
    initialize_timeout: config.initializeTimeout,
    reuse_session: spec.reuseSession ?? config.reuseSession,
    create_session_if_missing: config.createSessionIfMissing,
    streaming: config.streaming,
    permission_decision: config.permissionDecision === "ask" && !spec.askAllowed
      ? config.permissionFallback
      : config.permissionDecision,
    stored_session_id: spec.storedSessionId ?? null,
    ...(spec.sessionMemory
      ? { stored_session_config: spec.sessionMemory as Json }
      : {}),
    mcp_servers: (spec.mcpServers ?? []) as unknown as Json,
    langbot_assets_enabled: config.langbotAssetsEnabled,
    mcp_request_timeout: spec.mcpRequestTimeout ??
      MCP_REQUEST_TIMEOUT_MS / 1000,
    ...(spec.sessionUpdates ? { session_updates: true } : {}),
  };
  for (const key of EXTRA_KEYS) {
    const keySpec = RUN_CONFIG_KEYS[key];
    const value = config[keySpec.field];
    if (value === undefined || isEmptyObject(value)) continue;
    if (value !== keySpec.default) {
      payloadConfig[key.replaceAll("-", "_")] = value as Json;
    }
  }
  return {
    run_id: spec.runId,
    prompt_text: spec.promptPrefix ? `${spec.promptPrefix}\n\n${text}` : text,
    input: {
      text,
      attachments: (spec.input.attachments ?? []) as unknown as Json,
    },
    input_text: text,
    config: payloadConfig,
  };
}

/** A `run.start` payload mapped onto a local run. */
export interface DaemonJobPlan {
  /** The run id (the job id when the payload has none). */
  runId: string;
  /** The local run config: the agent starts in `config.workspace`. */
  config: RunConfig;
  /** The prompt. */
  input: RunInput;
  /** The session to resume, if any. */
  storedSessionId?: string;
  /**
   * The session config values the hub remembers for the conversation
   * (`stored_session_config`); undefined when the hub sent none (LangBot's
   * hub keeps none).
   */
  sessionMemory?: JsonObject;
  /** The ACP session's working directory. */
  sessionCwd: string;
  /** MCP servers from the payload. */
  mcpServers: McpServer[];
  /** Whether to inject the MCP proxy (`langbot_assets_enabled`, default true). */
  assetsEnabled: boolean;
  /** The MCP proxy's per-request timeout. */
  mcpRequestTimeoutMs: number;
  /** Config keys that were present but mean nothing to the daemon. */
  ignoredKeys: string[];
  /** Whether the hub asked for the agent's live `session/update`s (`session_updates`). */
  sessionUpdates: boolean;
}

/** Options of {@linkcode mapRunStart}. */
export interface MapRunStartOptions {
  /** The job id (the run id when the payload has none). */
  jobId: string;
  /** Where the agent starts when the payload names no directory. */
  fallbackCwd: string;
  /** The home directory `~` stands for. */
  home?: string;
  /** The daemon's own sandbox settings: a floor the hub cannot lower, and the only source of sandbox paths. */
  sandbox?: DaemonSandbox;
  /** The daemon's own client-terminal settings: the hub may lower them, never raise them. */
  terminals?: DaemonTerminals;
}

/** The daemon's own client-terminal settings (`runner daemon --client-terminals …`). */
export interface DaemonTerminals {
  /** `false`: no job's agent gets client terminals, whatever `run.start` asks. */
  clientTerminals: boolean;
  /** The longest `terminal-timeout` a job gets, in seconds. */
  terminalTimeout: number;
}

/** The daemon's own sandbox settings (`runner daemon --sandbox …`, `docs/sandbox.md`). */
export interface DaemonSandbox {
  /** `confined`: every job is confined, whatever `run.start` says. */
  sandbox: RunConfig["sandbox"];
  /** `none`: no confined job gets a network. */
  sandboxNetwork: RunConfig["sandboxNetwork"];
  /** Paths confined agents may read. */
  sandboxReadPaths: string[];
  /** Paths confined agents may write. */
  sandboxWritePaths: string[];
}

/** Payload config keys (after `_` → `-`) passed to `parseRunConfig` as they are. */
const PASSED_KEYS = new Set([
  "provider",
  "provider-version",
  "timeout",
  "startup-timeout",
  "initialize-timeout",
  "reuse-session",
  "create-session-if-missing",
  "streaming",
  "permission-decision",
  ...EXTRA_KEYS,
]);

/** Keys the daemon reads itself. */
const OWN_KEYS = new Set([
  "acp-command",
  "workspace",
  "cwd",
  "session-cwd",
  "env",
  "env-json",
  "stored-session-id",
  "stored-session-config",
  "mcp-servers",
  "langbot-assets-enabled",
  "mcp-request-timeout",
  "session-updates",
]);

function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function text(value: unknown): string | undefined {
  if (typeof value !== "string") return undefined;
  return value.trim() === "" ? undefined : value;
}

function invalid(key: string, message: string): RunnerError {
  return new RunnerError(
    "config.invalid",
    `run.start config ${key}: ${message}`,
    {
      detail: { key },
    },
  );
}

function expandHome(path: string | undefined, home?: string) {
  if (path === undefined || !home) return path;
  if (path === "~") return home;
  return path.startsWith("~/") ? `${home}${path.slice(1)}` : path;
}

function acpCommandOf(value: unknown): string | undefined {
  if (Array.isArray(value)) {
    if (!value.every((word) => typeof word === "string")) {
      throw invalid("acp_command", "a list must hold only strings");
    }
    return value.length ? quoteCommand(value as string[]) : undefined;
  }
  if (value === undefined || typeof value === "string") return text(value);
  throw invalid("acp_command", "must be a string or a list of strings");
}

function mcpServersOf(value: unknown): McpServer[] {
  let list = value;
  if (typeof value === "string") {
    if (!value.trim()) return [];
    try {
      list = JSON.parse(value);
    } catch {
      throw invalid("mcp_servers", "is not valid JSON");
    }
  }
  if (list === undefined) return [];
  if (!Array.isArray(list)) throw invalid("mcp_servers", "must be a list");
  for (const server of list) {
    if (!isObject(server) || typeof server.name !== "string") {
      throw invalid("mcp_servers", "every entry must be an object with a name");
    }
  }
  return list as McpServer[];
}

function envOf(value: unknown): Record<string, unknown> | string | undefined {
  if (typeof value === "string") return value;
  if (!isObject(value)) return undefined;
  return Object.fromEntries(
    Object.entries(value).filter(([, inner]) => inner !== null),
  );
}

/**
 * The hub may ask for the sandbox; the daemon's own `confined` holds whatever
 * it asks, a network wider than the daemon's own (`none` < `full` < `host`)
 * becomes the daemon's, and only the daemon names sandbox paths.
 */
function sandboxFloor(
  asked: Record<string, unknown>,
  own: DaemonSandbox | undefined,
): Record<string, unknown> {
  const confined = own?.sandbox === "confined";
  const network = asked["sandbox-network"] ?? "full";
  const wider = confined && SANDBOX_NETWORKS.includes(network as never) &&
    widerNetwork(network as SandboxNetwork, own.sandboxNetwork);
  return {
    sandbox: confined ? "confined" : asked.sandbox,
    "sandbox-network": wider ? own.sandboxNetwork : asked["sandbox-network"],
    "sandbox-read-paths": own?.sandboxReadPaths,
    "sandbox-write-paths": own?.sandboxWritePaths,
  };
}

/**
 * Maps a `run.start` payload onto a local run. The agent starts in `cwd`,
 * else `workspace`, else `fallbackCwd`; the ACP session's cwd is
 * `session_cwd`, else that directory. Throws `config.invalid` for values that
 * cannot work; unknown keys are only listed in `ignoredKeys`.
 */
export function mapRunStart(
  payload: JsonObject,
  options: MapRunStartOptions,
): DaemonJobPlan {
  const raw = isObject(payload.config) ? payload.config : {};
  const given = new Map<string, Json>();
  const ignoredKeys: string[] = [];
  for (const [key, value] of Object.entries(raw)) {
    const name = key.replaceAll("_", "-");
    if (value === null || value === "") continue;
    if (PASSED_KEYS.has(name) || OWN_KEYS.has(name)) given.set(name, value);
    else ignoredKeys.push(key);
  }
  const home = options.home;
  const path = (key: string) => {
    const value = given.get(key);
    if (value !== undefined && typeof value !== "string") {
      throw invalid(key.replaceAll("-", "_"), "must be a path string");
    }
    return expandHome(text(value), home);
  };
  const cwd = path("cwd") ?? path("workspace") ?? options.fallbackCwd;
  const sessionCwd = path("session-cwd") ?? cwd;
  const acpCommand = presetDefaultDropped(
    text(given.get("provider")),
    acpCommandOf(given.get("acp-command")),
  );
  const layer: Record<string, unknown> = {};
  for (const key of PASSED_KEYS) {
    if (given.has(key)) layer[key] = given.get(key);
  }
  layer.provider ??= acpCommand ? "custom" : undefined;
  const asked = parseRunConfig({
    ...layer,
    ...sandboxFloor(layer, options.sandbox),
    location: "local",
    workspace: cwd,
    "session-cwd": sessionCwd,
    "acp-command": acpCommand,
    "env-json": envOf(given.get("env-json") ?? given.get("env")),
    "langbot-assets-enabled": given.get("langbot-assets-enabled"),
  });
  const own = options.terminals;
  const config = own
    ? {
      ...asked,
      clientTerminals: asked.clientTerminals && own.clientTerminals,
      terminalTimeout: Math.min(asked.terminalTimeout, own.terminalTimeout),
    }
    : asked;
  const timeout = given.get("mcp-request-timeout");
  let mcpRequestTimeoutMs = MCP_REQUEST_TIMEOUT_MS;
  if (timeout !== undefined) {
    const seconds = Number(timeout);
    if (!Number.isFinite(seconds) || seconds <= 0) {
      throw invalid("mcp_request_timeout", "must be a number of seconds > 0");
    }
    mcpRequestTimeoutMs = seconds * 1000;
  }
  const stored = given.get("stored-session-id");
  const memory = given.get("stored-session-config");
  if (memory !== undefined && !isObject(memory)) {
    throw invalid("stored_session_config", "must be an object");
  }
  return {
    runId: text(payload.run_id) ?? options.jobId,
    config,
    input: runInputOf(payload),
    storedSessionId: typeof stored === "string" ? text(stored) : undefined,
    sessionMemory: memory,
    sessionCwd,
    mcpServers: mcpServersOf(given.get("mcp-servers")),
    assetsEnabled: config.langbotAssetsEnabled,
    mcpRequestTimeoutMs,
    ignoredKeys,
    sessionUpdates: given.get("session-updates") === true,
  };
}

/**
 * A hub sends a preset's default command in every `run.start` (`daemon.py`
 * needs one): ours the pinned fallback, LangBot's the unpinned `npx` line, or
 * the agent's own program name. Any of those means "the preset's default", so
 * it is dropped and this daemon picks by its own `PATH` like a local run.
 */
function presetDefaultDropped(
  provider: string | undefined,
  acpCommand: string | undefined,
): string | undefined {
  const pin = provider ? PRESET_PINS[provider] : undefined;
  if (!pin || acpCommand === undefined) return acpCommand;
  const defaults = [
    fallbackArgv(pin),
    fallbackArgv({ ...pin, version: null }),
    executableArgv(pin),
  ].map((argv) => argv.join(" "));
  return defaults.includes(acpCommand.trim().replace(/\s+/g, " "))
    ? undefined
    : acpCommand;
}
