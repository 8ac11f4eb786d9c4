/**
 * The caller policy of `runner serve`: which run settings an HTTP caller may
 * set per run, and merging them over the server-wide defaults.
 *
 * @module
 */

import { parseRunConfig, RUN_CONFIG_KEYS, type RunConfig } from "../config.ts";
import { RunnerError } from "../errors.ts";
import { CUSTOM_PROVIDER } from "../agent/providers.ts";
import { widerNetwork } from "../agent/sandbox_network.ts";
import { parseRunDefaults, type ServeConfig } from "./config/serve_config.ts";
import { checkPermissionFloor } from "./permission_floor.ts";

/**
 * Run-config keys a caller may set per run. Keys that choose a command to
 * execute (`acp-command`, `mcp-servers-json`, `ssh-extra-options`,
 * `ssh-identity-file`) need `--allow-custom-commands`; env-json names need
 * `--allow-env-names`.
 */
export const CALLER_CONFIG_KEYS: readonly string[] = [
  "provider",
  "location",
  "workspace",
  "session-cwd",
  "env-json",
  "reuse-session",
  "create-session-if-missing",
  "streaming",
  "startup-timeout",
  "initialize-timeout",
  "timeout",
  "cancel-grace",
  "late-update-ms",
  "delta-coalesce-ms",
  "replay-quiet-ms",
  "max-message-mb",
  "max-attachment-mb",
  "max-prompt-mb",
  "permission-decision",
  "permission-timeout",
  "permission-fallback",
  "permission-rules-json",
  "model",
  "mode",
  "session-config-json",
  "auth-method",
  "fs-read",
  "fs-write",
  "client-terminals",
  "terminal-timeout",
  "terminal-output-bytes",
  "append-run-scope-prompt",
  "langbot-assets-enabled",
  "langbot-assets-mode",
  "langbot-assets-token-ttl",
  "knowledge-bases",
  "sandbox",
  "sandbox-network",
  "ssh-target",
  "ssh-port",
  "ssh-connect-timeout",
  "remote-shell",
  "daemon-id",
  "daemon-connect-timeout",
];

/** Limits a caller may lower but not raise past the operator's value. */
const CAPPED_KEYS = [
  "max-message-mb",
  "max-attachment-mb",
  "max-prompt-mb",
  "terminal-output-bytes",
  "terminal-timeout",
];

/** Run-config keys that choose a command; a caller may set them only under `--allow-custom-commands`. */
export const COMMAND_CONFIG_KEYS: readonly string[] = [
  "acp-command",
  "mcp-servers-json",
  "ssh-extra-options",
  "ssh-identity-file",
];

/**
 * Merges a caller's kebab-case run config over the server defaults, after
 * checking it against the allow-list; env-json objects are merged by name.
 *
 * @throws {RunnerError} `http.forbidden` for a setting the operator did not
 * allow; `config.invalid` for unknown keys, bad values or missing ones.
 */
export function resolveCallerConfig(
  serve: Pick<
    ServeConfig,
    "allowCustomCommands" | "allowEnvNames" | "runDefaults"
  >,
  caller: Record<string, unknown> = {},
): RunConfig {
  // No prototype: a caller's "__proto__" or "constructor" is just an unknown key.
  const normalized: Record<string, unknown> = Object.create(null);
  for (const [rawKey, value] of Object.entries(caller)) {
    if (value === undefined || value === null) continue;
    normalized[rawKey.replaceAll("_", "-")] = value;
  }
  for (const key of Object.keys(normalized)) {
    if (key === "advanced-settings") continue;
    if (!Object.hasOwn(RUN_CONFIG_KEYS, key)) {
      throw new RunnerError(
        "config.invalid",
        `${key}: unknown config key. Known keys: ${
          CALLER_CONFIG_KEYS.join(", ")
        }`,
      );
    }
    const allowed = CALLER_CONFIG_KEYS.includes(key) ||
      (serve.allowCustomCommands && COMMAND_CONFIG_KEYS.includes(key));
    if (!allowed) {
      throw new RunnerError(
        "http.forbidden",
        COMMAND_CONFIG_KEYS.includes(key)
          ? `${key} chooses a command to execute; the server only accepts it when started with --allow-custom-commands.`
          : `${key} can only be set by the operator (runner serve flags), not per request.`,
        { detail: { key } },
      );
    }
  }
  if (
    !serve.allowCustomCommands &&
    String(normalized.provider ?? "").trim() === CUSTOM_PROVIDER
  ) {
    throw new RunnerError(
      "http.forbidden",
      "provider=custom runs a caller-chosen command; the server only accepts it when started with --allow-custom-commands. Use a preset provider (GET /v1/providers).",
      { detail: { key: "provider" } },
    );
  }
  const base = parseRunDefaults(serve.runDefaults).envJson;
  let envJson = base;
  if (normalized["env-json"] !== undefined) {
    const extra = parseRunConfig(
      { provider: CUSTOM_PROVIDER, workspace: "/" },
      { "env-json": normalized["env-json"] },
    ).envJson;
    const refused = Object.keys(extra).filter((name) =>
      !serve.allowEnvNames.includes(name)
    );
    if (refused.length) {
      throw new RunnerError(
        "http.forbidden",
        `env-json: ${
          refused.join(", ")
        } may not be set per request. The operator can allow names with --allow-env-names${
          serve.allowEnvNames.length
            ? ` (allowed now: ${serve.allowEnvNames.join(", ")})`
            : " (none allowed now)"
        }.`,
        { detail: { key: "env-json", names: refused } },
      );
    }
    envJson = { ...base, ...extra };
  }
  const resolved = parseRunConfig(serve.runDefaults, normalized, {
    "env-json": envJson,
  });
  checkCaps(serve, normalized, resolved);
  checkSandboxFloor(serve, resolved);
  checkTerminalFloor(serve, resolved);
  return resolved;
}

/**
 * Client terminals run the agent's commands on this machine: only the
 * operator turns them on; a caller may turn them off.
 */
function checkTerminalFloor(
  serve: Pick<ServeConfig, "runDefaults">,
  resolved: RunConfig,
): void {
  if (!resolved.clientTerminals) return;
  if (parseRunDefaults(serve.runDefaults).clientTerminals) return;
  throw new RunnerError(
    "http.forbidden",
    "client-terminals: the operator has not turned client terminals on (runner serve --client-terminals true); a request may turn them off, never on.",
    { detail: { key: "client-terminals" } },
  );
}

/**
 * A caller may confine its run more than the operator does, never less:
 * `sandbox=off` under an operator's `confined`, or a `sandbox-network` wider
 * than the operator's (`none` < `full` < `host`), is refused.
 */
function checkSandboxFloor(
  serve: Pick<ServeConfig, "runDefaults">,
  resolved: RunConfig,
): void {
  const operator = parseRunDefaults(serve.runDefaults);
  if (operator.sandbox !== "confined") return;
  const key = resolved.sandbox !== "confined"
    ? "sandbox"
    : widerNetwork(resolved.sandboxNetwork, operator.sandboxNetwork)
    ? "sandbox-network"
    : undefined;
  if (!key) return;
  throw new RunnerError(
    "http.forbidden",
    `${key}: the operator confines every run (sandbox=confined, sandbox-network=${operator.sandboxNetwork}); a request may confine its run more, never less.`,
    { detail: { key } },
  );
}

/**
 * Refuses a caller's size limit above the operator's (the server default, or
 * the built-in one), and a looser permission policy.
 */
function checkCaps(
  serve: Pick<ServeConfig, "runDefaults">,
  caller: Record<string, unknown>,
  resolved: RunConfig,
): void {
  const operator = parseRunDefaults(serve.runDefaults);
  checkPermissionFloor({ operator, resolved, caller });
  for (const key of CAPPED_KEYS) {
    if (caller[key] === undefined) continue;
    const field = RUN_CONFIG_KEYS[key].field;
    const limit = operator[field] as number;
    if ((resolved[field] as number) > limit) {
      throw new RunnerError(
        "config.invalid",
        `${key}: at most ${limit} per request (the server's limit; the operator can raise it with runner serve --${key}).`,
        { detail: { key } },
      );
    }
  }
}
