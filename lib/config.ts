/**
 * The run config: the seed's kebab-case keys, parsed and validated in one
 * place. Every location, the CLI, the HTTP API and the daemon use this parser.
 * See `docs/config.md`.
 *
 * @module
 */

import { isAbsolute, join, win32 } from "node:path";
import { RunnerError } from "./errors.ts";
import { parsePermissionDecision } from "./acp/permission_options.ts";
import type { PermissionOptionKind as PermissionKind } from "@agentclientprotocol/sdk";

/** Where the agent runs. */
export type Location = "local" | "remote-ssh" | "daemon";

/** A validated run config (camelCase mirror of the kebab-case keys). */
export interface RunConfig {
  provider: string;
  location: Location;
  workspace?: string;
  sessionCwd?: string;
  acpCommand?: string;
  envJson: Record<string, string>;
  reuseSession: boolean;
  createSessionIfMissing: boolean;
  streaming: boolean;
  startupTimeout: number;
  initializeTimeout: number;
  timeout: number;
  cancelGrace: number;
  lateUpdateMs: number;
  maxMessageMb: number;
  maxAttachmentMb: number;
  maxPromptMb: number;
  permissionDecision: PermissionKind;
  fsRead: boolean;
  fsWrite: boolean;
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
  sshTarget?: string;
  sshPort: number;
  sshIdentityFile?: string;
  sshConnectTimeout: number;
  sshExtraOptions: string[];
  remoteShell: "bash" | "powershell";
  daemonId?: string;
  daemonConnectTimeout: number;
}

type Kind =
  | "string"
  | "bool"
  | "seconds"
  | "number"
  | "port"
  | "path"
  | "json"
  | "list"
  | "json-text";

interface KeySpec {
  field: keyof RunConfig;
  kind: Kind;
  default?: unknown;
  choices?: readonly string[];
  /** Largest accepted value (seconds keys default to what a timer can hold). */
  max?: number;
}

/** The longest duration a JavaScript timer can wait, in whole seconds. */
const MAX_TIMER_SECONDS = 2_147_483;

/** Every accepted run-config key with its kind and default. */
export const RUN_CONFIG_KEYS: Record<string, KeySpec> = {
  "provider": { field: "provider", kind: "string" },
  "location": {
    field: "location",
    kind: "string",
    default: "local",
    choices: ["local", "remote-ssh", "daemon"],
  },
  "workspace": { field: "workspace", kind: "path" },
  "session-cwd": { field: "sessionCwd", kind: "path" },
  "acp-command": { field: "acpCommand", kind: "string" },
  "env-json": { field: "envJson", kind: "json", default: {} },
  "reuse-session": { field: "reuseSession", kind: "bool", default: true },
  "create-session-if-missing": {
    field: "createSessionIfMissing",
    kind: "bool",
    default: true,
  },
  "streaming": { field: "streaming", kind: "bool", default: true },
  "startup-timeout": { field: "startupTimeout", kind: "seconds", default: 60 },
  "initialize-timeout": {
    field: "initializeTimeout",
    kind: "seconds",
    default: 30,
  },
  "timeout": { field: "timeout", kind: "seconds", default: 600 },
  "cancel-grace": {
    field: "cancelGrace",
    kind: "seconds",
    default: 3,
    max: 5,
  },
  "late-update-ms": {
    field: "lateUpdateMs",
    kind: "number",
    default: 150,
    max: 5000,
  },
  "max-message-mb": { field: "maxMessageMb", kind: "number", default: 64 },
  "max-attachment-mb": {
    field: "maxAttachmentMb",
    kind: "number",
    default: 10,
  },
  "max-prompt-mb": { field: "maxPromptMb", kind: "number", default: 25 },
  "permission-decision": {
    field: "permissionDecision",
    kind: "string",
    default: "allow_once",
  },
  "fs-read": { field: "fsRead", kind: "bool", default: false },
  "fs-write": { field: "fsWrite", kind: "bool", default: false },
  "append-run-scope-prompt": {
    field: "appendRunScopePrompt",
    kind: "bool",
    default: false,
  },
  "mcp-servers-json": { field: "mcpServersJson", kind: "json-text" },
  "langbot-assets-enabled": {
    field: "langbotAssetsEnabled",
    kind: "bool",
    default: true,
  },
  "langbot-assets-mode": {
    field: "langbotAssetsMode",
    kind: "string",
    default: "auto",
    choices: ["auto", "ephemeral", "gateway"],
  },
  "langbot-assets-gateway-host": {
    field: "langbotAssetsGatewayHost",
    kind: "string",
    default: "127.0.0.1",
  },
  "langbot-assets-gateway-port": {
    field: "langbotAssetsGatewayPort",
    kind: "port",
  },
  "langbot-assets-gateway-public-url": {
    field: "langbotAssetsGatewayPublicUrl",
    kind: "string",
  },
  "langbot-assets-token-ttl": {
    field: "langbotAssetsTokenTtl",
    kind: "seconds",
    default: 3600,
  },
  "mcp-bridge-transport": {
    field: "mcpBridgeTransport",
    kind: "string",
    default: "ssh-tunnel",
    choices: ["ssh-tunnel", "http"],
  },
  "mcp-bridge-host": {
    field: "mcpBridgeHost",
    kind: "string",
    default: "127.0.0.1",
  },
  "mcp-bridge-port": { field: "mcpBridgePort", kind: "port" },
  "mcp-public-url": { field: "mcpPublicUrl", kind: "string" },
  "knowledge-bases": { field: "knowledgeBases", kind: "list", default: [] },
  "ssh-target": { field: "sshTarget", kind: "string" },
  "ssh-port": { field: "sshPort", kind: "port", default: 22 },
  "ssh-identity-file": { field: "sshIdentityFile", kind: "string" },
  "ssh-connect-timeout": {
    field: "sshConnectTimeout",
    kind: "seconds",
    default: 15,
  },
  "ssh-extra-options": { field: "sshExtraOptions", kind: "list", default: [] },
  "remote-shell": {
    field: "remoteShell",
    kind: "string",
    default: "bash",
    choices: ["bash", "powershell"],
  },
  "daemon-id": { field: "daemonId", kind: "string" },
  "daemon-connect-timeout": {
    field: "daemonConnectTimeout",
    kind: "seconds",
    default: 30,
  },
};

/** Keys accepted for compatibility that change nothing (form visibility). */
const IGNORED_KEYS = new Set(["advanced-settings"]);

function invalid(key: string, message: string): RunnerError {
  return new RunnerError("config.invalid", `${key}: ${message}`, {
    detail: { key },
  });
}

function convert(key: string, spec: KeySpec, value: unknown): unknown {
  switch (spec.kind) {
    case "string": {
      if (typeof value !== "string" && typeof value !== "number") {
        throw invalid(key, "must be a string");
      }
      const text = String(value).trim();
      if (spec.choices && !spec.choices.includes(text)) {
        throw invalid(key, `must be one of ${spec.choices.join(", ")}`);
      }
      return text;
    }
    case "path": {
      if (typeof value !== "string" || !value.trim()) {
        throw invalid(key, "must be a non-empty path");
      }
      const path = value.trim();
      if (!isPosixStylePath(path) && !isWindowsStylePath(path)) {
        throw invalid(key, `must be an absolute path (got "${value}")`);
      }
      return path;
    }
    case "bool": {
      if (typeof value === "boolean") return value;
      const text = String(value).trim().toLowerCase();
      if (["true", "1", "yes", "on"].includes(text)) return true;
      if (["false", "0", "no", "off"].includes(text)) return false;
      throw invalid(key, "must be true or false");
    }
    case "seconds":
    case "number":
    case "port": {
      const number = typeof value === "number" ? value : Number(String(value));
      if (!Number.isFinite(number) || String(value).trim() === "") {
        throw invalid(key, "must be a number");
      }
      if (spec.kind === "port") {
        if (!Number.isInteger(number) || number < 0 || number > 65535) {
          throw invalid(key, "must be a port number 0-65535");
        }
      } else if (number <= 0) {
        throw invalid(key, "must be greater than 0");
      }
      const max = spec.max ??
        (spec.kind === "seconds" ? MAX_TIMER_SECONDS : undefined);
      if (max !== undefined && number > max) {
        throw invalid(key, `must be at most ${max}`);
      }
      return number;
    }
    case "json-text": {
      if (typeof value === "string") return value;
      if (value && typeof value === "object") return JSON.stringify(value);
      throw invalid(key, "must be JSON (an array or object, or its text)");
    }
    case "json":
      return parseEnvJson(key, value);
    case "list": {
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
  }
}

function parseEnvJson(key: string, value: unknown): Record<string, string> {
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
  const env: Record<string, string> = {};
  for (const [name, inner] of Object.entries(parsed)) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) {
      throw invalid(key, `"${name}" is not a valid environment variable name`);
    }
    if (
      typeof inner !== "string" && typeof inner !== "number" &&
      typeof inner !== "boolean"
    ) {
      throw invalid(key, `the value of ${name} must be a string`);
    }
    env[name] = String(inner);
  }
  return env;
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
      if (!(key in RUN_CONFIG_KEYS)) {
        throw invalid(
          key,
          `unknown config key. Known keys: ${
            Object.keys(RUN_CONFIG_KEYS).join(", ")
          }`,
        );
      }
      merged[key] = value;
    }
  }
  const config: Record<string, unknown> = {};
  for (const [key, spec] of Object.entries(RUN_CONFIG_KEYS)) {
    const value = merged[key] ?? spec.default;
    if (value === undefined) continue;
    config[spec.field] = key in merged ? convert(key, spec, value) : value;
  }
  const result = config as unknown as RunConfig;
  result.permissionDecision = parsePermissionDecision(
    result.permissionDecision,
  );
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
  checkPaths(result);
  checkMcpBridge(result);
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

/** An absolute path of this machine's kind, `~` or `~/…`. */
function isPosixStylePath(path: string): boolean {
  return isAbsolute(path) || path === "~" || path.startsWith("~/");
}

/** A Windows absolute path (`C:\…`, `C:/…`, `\\server\share`) or `~\…`. */
function isWindowsStylePath(path: string): boolean {
  return win32.isAbsolute(path) || path.startsWith("~\\");
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
