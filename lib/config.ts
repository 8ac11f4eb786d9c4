/**
 * The run config: the seed's kebab-case keys, parsed and validated in one
 * place against their one description (`config_schema.ts`). Every location,
 * the CLI, the HTTP API and the daemon use this parser. See `docs/config.md`.
 *
 * @module
 */

import { join } from "node:path";
import { RunnerError } from "./errors.ts";
import { closestName } from "./closest_name.ts";
import type { PermissionOptionKind as PermissionKind } from "@agentclientprotocol/sdk";
import {
  type ConfigKind,
  isPosixStylePath,
  RUN_CONFIG_SPEC,
} from "./config_schema.ts";

/** One `permission-rules-json` rule: what it matches and what it decides. */
export interface PermissionRule {
  /** Tool kinds (`read`, `edit`, `execute`, …); absent: any. */
  kind?: string | string[];
  /** A glob on the tool call's title; absent: any. */
  title?: string;
  /** A glob on the call's paths, relative to the workspace; absent: any. */
  path?: string;
  /**
   * A client terminal command's argv: a glob on the program, then one glob
   * per argument (`...` last: any further ones); only terminal commands.
   */
  command?: string[];
  /** With `command`: globs on the values of the variables a command may set, by name. */
  env?: Record<string, string>;
  /** `allow`, `reject`, `ask`, or an exact kind such as `allow_always`. */
  decision: string;
}

/** Where the agent runs. */
export type Location = "local" | "remote-ssh" | "daemon";

/** A validated run config (camelCase mirror of the kebab-case keys). */
export interface RunConfig {
  provider: string;
  location: Location;
  workspace?: string;
  sessionCwd?: string;
  workspaceRoots: string[];
  acpCommand?: string;
  providerVersion?: string;
  registryUrl: string;
  registryRefresh: number;
  envJson: Record<string, string>;
  secretEnvNames: string[];
  reuseSession: boolean;
  createSessionIfMissing: boolean;
  streaming: boolean;
  startupTimeout: number;
  initializeTimeout: number;
  timeout: number;
  cancelGrace: number;
  lateUpdateMs: number;
  deltaCoalesceMs: number;
  replayQuietMs: number;
  maxMessageMb: number;
  maxAttachmentMb: number;
  maxPromptMb: number;
  permissionDecision: PermissionKind | "ask";
  permissionTimeout: number;
  permissionFallback: PermissionKind;
  model?: string;
  mode?: string;
  sessionConfigJson: Record<string, string | boolean>;
  callerModels: string[];
  callerModes: string[];
  callerSessionConfigKeys: string[];
  permissionRulesJson: PermissionRule[];
  authMethod?: string;
  fsRead: boolean;
  fsWrite: boolean;
  clientTerminals: boolean;
  terminalTimeout: number;
  terminalOutputBytes: number;
  appendRunScopePrompt: boolean;
  mcpServersJson?: string;
  langbotAssetsEnabled: boolean;
  langbotAssetsMode: "auto" | "ephemeral" | "gateway";
  langbotAssetsGatewayHost: string;
  langbotAssetsGatewayPort?: number;
  langbotAssetsGatewayPublicUrl?: string;
  langbotAssetsTokenTtl: number;
  mcpBridgeTransport: "ssh-tunnel" | "http";
  mcpBridgeHost: string;
  mcpBridgePort?: number;
  mcpPublicUrl?: string;
  knowledgeBases: string[];
  sandbox: "off" | "confined";
  sandboxNetwork: "none" | "full" | "host";
  sandboxReadPaths: string[];
  sandboxWritePaths: string[];
  sshTarget?: string;
  sshPort: number;
  sshIdentityFile?: string;
  sshConnectTimeout: number;
  sshExtraOptions: string[];
  remoteShell: "bash" | "powershell";
  daemonId?: string;
  daemonConnectTimeout: number;
}

/** How an accepted key maps onto {@linkcode RunConfig}. */
export interface KeySpec {
  /** The camelCase field of {@linkcode RunConfig}. */
  field: keyof RunConfig;
  /** How a text value is read. */
  kind: ConfigKind;
  /** The default, when the key has one. */
  default?: unknown;
}

/** A plain decimal number, as text (no hex, exponent, `+` or `Infinity`). */
export const DECIMAL_PATTERN = /^-?\d+(\.\d+)?$/;

function camelCase(key: string): keyof RunConfig {
  return key.replace(
    /-([a-z])/g,
    (_, letter: string) => letter.toUpperCase(),
  ) as keyof RunConfig;
}

/** Every accepted run-config key with its field and default (from `RUN_CONFIG_SPEC`). */
export const RUN_CONFIG_KEYS: Record<string, KeySpec> = Object.fromEntries(
  Object.entries(RUN_CONFIG_SPEC).map(([key, spec]) => [key, {
    field: camelCase(key),
    kind: spec.kind,
    default: structuredClone(spec.fallback),
  }]),
);

/** Keys accepted for compatibility that change nothing (form visibility). */
const IGNORED_KEYS = new Set(["advanced-settings"]);

function invalid(key: string, message: string): RunnerError {
  return new RunnerError("config.invalid", `${key}: ${message}`, {
    detail: { key },
  });
}

/** Reads a text (or JSON-typed) value as the type `kind` names; leaves the rest to the schema. */
function fromText(key: string, kind: ConfigKind, value: unknown): unknown {
  switch (kind) {
    case "string":
      return typeof value === "string"
        ? value.trim()
        : typeof value === "number"
        ? String(value)
        : value;
    case "permission":
      return typeof value === "string"
        ? value.trim().toLowerCase().replaceAll("-", "_")
        : value;
    case "bool": {
      if (typeof value === "boolean") return value;
      const text = String(value).trim().toLowerCase();
      if (["true", "1", "yes", "on"].includes(text)) return true;
      if (["false", "0", "no", "off"].includes(text)) return false;
      return value;
    }
    case "number": {
      if (typeof value !== "string") return value;
      if (!DECIMAL_PATTERN.test(value.trim())) {
        throw invalid(
          key,
          `must be a number, written in decimal (got "${value}")`,
        );
      }
      return Number(value);
    }
    case "json-text":
      if (typeof value === "string") return value;
      if (value && typeof value === "object") return JSON.stringify(value);
      throw invalid(key, "must be JSON (an array or object, or its text)");
    case "env":
      return envFromText(key, value);
    case "json":
      return jsonFromText(key, value);
    case "list":
      return listFromText(key, value);
  }
}

function listFromText(key: string, value: unknown): unknown {
  if (Array.isArray(value)) return value.map(String);
  const text = String(value).trim();
  if (text.startsWith("[")) {
    try {
      const parsed = JSON.parse(text);
      if (Array.isArray(parsed)) return parsed.map(String);
    } catch { /* fall through */ }
    throw invalid(key, "must be a JSON array or a comma-separated list");
  }
  return text ? text.split(",").map((item) => item.trim()) : [];
}

function jsonFromText(key: string, value: unknown): unknown {
  if (typeof value !== "string") return value;
  if (!value.trim()) return structuredClone(RUN_CONFIG_SPEC[key].fallback);
  try {
    return JSON.parse(value);
  } catch {
    throw invalid(key, "must be JSON (it is not valid JSON)");
  }
}

function envFromText(key: string, value: unknown): unknown {
  let parsed = value;
  if (typeof value === "string") {
    if (!value.trim()) return {};
    try {
      parsed = JSON.parse(value);
    } catch {
      throw invalid(key, "must be a JSON object (it is not valid JSON)");
    }
  }
  if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) {
    throw invalid(key, "must be a JSON object of NAME: value strings");
  }
  // Numbers and booleans are written as the agent will see them.
  return Object.fromEntries(
    Object.entries(parsed).map(([name, inner]) => [
      name,
      typeof inner === "number" || typeof inner === "boolean"
        ? String(inner)
        : inner,
    ]),
  );
}

/** A key's value read and checked against its schema; throws `config.invalid` with the schema's message. */
function convert(key: string, value: unknown): unknown {
  const spec = RUN_CONFIG_SPEC[key];
  const result = spec.schema.safeParse(fromText(key, spec.kind, value));
  if (result.success) return result.data;
  const issue = result.error.issues[0] as {
    message: string;
    path: PropertyKey[];
    issues?: Array<{ message: string }>;
  };
  const message = issue.issues?.[0]?.message ?? issue.message;
  const where = issue.path.length && !issue.issues
    ? `${String(issue.path[0])}: `
    : "";
  throw invalid(key, where + message);
}

/**
 * Parses kebab-case config (later layers win) into a {@linkcode RunConfig}.
 * Unknown keys, bad values and missing required keys throw `config.invalid`.
 */
export function parseRunConfig(
  ...layers: Array<Record<string, unknown> | undefined>
): RunConfig {
  const merged: Record<string, unknown> = {};
  for (const layer of layers) {
    for (const [rawKey, value] of Object.entries(layer ?? {})) {
      if (value === undefined || value === null) continue;
      const key = rawKey.replaceAll("_", "-");
      if (IGNORED_KEYS.has(key)) continue;
      if (!Object.hasOwn(RUN_CONFIG_KEYS, key)) {
        const meant = closestName(key, Object.keys(RUN_CONFIG_KEYS));
        throw invalid(
          key,
          `unknown config key${
            meant ? ` (did you mean ${meant}?)` : ""
          }. Known keys: ${Object.keys(RUN_CONFIG_KEYS).join(", ")}`,
        );
      }
      merged[key] = value;
    }
  }
  const config: Record<string, unknown> = {};
  for (const [key, spec] of Object.entries(RUN_CONFIG_KEYS)) {
    const value = merged[key] ?? spec.default;
    if (value === undefined) continue;
    config[spec.field] = key in merged ? convert(key, value) : value;
  }
  const result = config as unknown as RunConfig;
  if (!result.provider) {
    throw invalid("provider", "is required (a preset name or custom)");
  }
  if (result.location === "remote-ssh" && !result.sshTarget) {
    throw invalid("ssh-target", "is required when location=remote-ssh");
  }
  if (
    result.sshTarget && !/^[A-Za-z0-9._~+@\[\]:%-]+$/.test(result.sshTarget)
  ) {
    throw invalid(
      "ssh-target",
      "must look like user@host (letters, digits, . _ - @ : [ ])",
    );
  }
  if (result.sshTarget?.startsWith("-")) {
    throw invalid("ssh-target", "must not start with -");
  }
  if (result.location === "remote-ssh" && (result.fsRead || result.fsWrite)) {
    throw invalid(
      result.fsRead ? "fs-read" : "fs-write",
      "is not available with location=remote-ssh: the runner would serve its own files, not the remote machine's. Leave fs-read and fs-write off (the agent reads and writes the remote workspace itself)",
    );
  }
  if (result.location === "remote-ssh" && result.clientTerminals) {
    throw invalid(
      "client-terminals",
      "is not available with location=remote-ssh: the agent's commands would run on the runner's machine, not the remote one. Leave client-terminals off (the agent runs commands on the remote machine itself)",
    );
  }
  checkPaths(result);
  checkWorkspaceRoots(result);
  checkMcpBridge(result);
  checkSandbox(result);
  if (result.location === "daemon" && !result.daemonId) {
    throw invalid("daemon-id", "is required when location=daemon");
  }
  if (result.location === "local" && !result.workspace) {
    throw invalid("workspace", "is required (an absolute directory)");
  }
  if (result.location === "local") {
    result.workspace = expandHome(result.workspace!);
    if (result.sessionCwd) result.sessionCwd = expandHome(result.sessionCwd);
  }
  return result;
}

/** Windows paths are for a PowerShell remote only; elsewhere paths are this machine's kind. */
function checkPaths(config: RunConfig): void {
  if (config.location === "remote-ssh" && config.remoteShell === "powershell") {
    return;
  }
  for (const key of ["workspace", "session-cwd"] as const) {
    const path = key === "workspace" ? config.workspace : config.sessionCwd;
    if (path !== undefined && !isPosixStylePath(path)) {
      throw invalid(key, `must be an absolute path (got "${path}")`);
    }
  }
}

/** `workspace-roots` are directories of this machine: absolute or `~/…`. */
function checkWorkspaceRoots(config: RunConfig): void {
  const bad = config.workspaceRoots.find((root) => !isPosixStylePath(root));
  if (bad !== undefined) {
    throw invalid(
      "workspace-roots",
      `must be absolute directories or ~/… (got "${bad}")`,
    );
  }
  config.workspaceRoots = config.workspaceRoots.map((root) =>
    root.startsWith("~") ? expandHome(root) : root
  );
}

/** The sandbox confines agents this machine starts, and `none` leaves no way to the assets endpoint. */
function checkSandbox(config: RunConfig): void {
  if (config.sandbox === "off") return;
  if (config.location === "remote-ssh") {
    throw invalid(
      "sandbox",
      "is not available with location=remote-ssh: the runner cannot confine an agent on another machine. Use sandbox=off, or run a runner daemon there",
    );
  }
  if (config.sandboxNetwork === "none" && config.langbotAssetsEnabled) {
    throw invalid(
      "sandbox-network",
      "none leaves the agent no network, so it cannot reach the run's assets endpoint either; set langbot-assets-enabled=false, or use sandbox-network=full",
    );
  }
  for (const key of ["sandbox-read-paths", "sandbox-write-paths"] as const) {
    const paths = key === "sandbox-read-paths"
      ? config.sandboxReadPaths
      : config.sandboxWritePaths;
    const bad = paths.find((path) => !isPosixStylePath(path));
    if (bad !== undefined) {
      throw invalid(key, `must be absolute paths or ~/… (got "${bad}")`);
    }
  }
}

/** `mcp-bridge-transport=http` needs the URL agents reach and, for a bridge, its port. */
function checkMcpBridge(config: RunConfig): void {
  if (config.mcpPublicUrl !== undefined) {
    let protocol = "";
    try {
      protocol = new URL(config.mcpPublicUrl).protocol;
    } catch { /* reported below */ }
    if (protocol !== "http:" && protocol !== "https:") {
      throw invalid(
        "mcp-public-url",
        "must be an http:// or https:// URL (the bridge's /mcp endpoint as the agent's machine reaches it)",
      );
    }
  }
  if (config.mcpBridgeTransport !== "http") return;
  if (config.mcpPublicUrl === undefined) {
    throw invalid(
      "mcp-public-url",
      "is required when mcp-bridge-transport=http: the URL of this runner's MCP bridge as the agent's machine reaches it, e.g. http://runner-host:8770/mcp",
    );
  }
  if (config.langbotAssetsMode !== "gateway" && !config.mcpBridgePort) {
    throw invalid(
      "mcp-bridge-port",
      "is required when mcp-bridge-transport=http (a fixed port, 1-65535, that mcp-public-url leads to; runs share it)",
    );
  }
}

/** `~` and `~/x` mean the runner user's home for paths on this machine. */
function expandHome(path: string): string {
  if (path !== "~" && !path.startsWith("~/")) return path;
  const home = Deno.env.get("HOME");
  if (!home) {
    throw invalid(
      "workspace",
      "starts with ~ but HOME is not set; give an absolute path",
    );
  }
  return path === "~" ? home : join(home, path.slice(2));
}
