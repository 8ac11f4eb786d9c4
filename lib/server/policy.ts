/**
 * The caller policy of `runner serve`: which run settings an HTTP caller may
 * set per run, and merging them over the server-wide defaults.
 *
 * @module
 */

import { parseRunConfig, RUN_CONFIG_KEYS, type RunConfig } from "../config.ts";
import { RunnerError } from "../errors.ts";
import { CUSTOM_PROVIDER, registryIdOf } from "../providers.ts";
import { parseRunDefaults, type ServeConfig } from "./config/serve_config.ts";
import {
  applyCallerFloor,
  CALLER_CONFIG_KEYS,
  type ProtectedPlaces,
  runnerPlaces,
  type SessionChoices,
  sessionChoicesOf,
} from "../run/caller_floor.ts";
import { defaultDataDir } from "../store/data_dir.ts";

/**
 * Run-config keys a caller may set per run, each with its floor
 * (`run/caller_floor.ts`). Keys that choose a command to execute
 * (`acp-command`, `mcp-servers-json`, `ssh-extra-options`,
 * `ssh-identity-file`) need `--allow-custom-commands`; env-json names need
 * `--allow-env-names`.
 */
export { CALLER_CONFIG_KEYS };

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
  serve:
    & Pick<ServeConfig, "allowCustomCommands" | "allowEnvNames" | "runDefaults">
    & Partial<Pick<ServeConfig, "dataDir">>,
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
  checkRegistryProvider(serve, normalized.provider);
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
  return applyCallerFloor({
    operator: operatorConfig(serve.runDefaults),
    caller: normalized,
    resolved,
    places: servePlaces(serve.dataDir),
  });
}

/**
 * The operator's run defaults as the floor sees them: a workspace only when
 * the operator set one (`parseRunDefaults` fills in a placeholder `/`).
 */
function operatorConfig(runDefaults: Record<string, unknown>): RunConfig {
  const parsed = parseRunDefaults(runDefaults);
  return runDefaults.workspace === undefined
    ? { ...parsed, workspace: undefined }
    : parsed;
}

/** What the operator's config lets callers (and remembered settings) choose of a session's values. */
export function serveSessionChoices(
  serve: Pick<ServeConfig, "runDefaults">,
): SessionChoices {
  return sessionChoicesOf(operatorConfig(serve.runDefaults));
}

/** The runner's own places no caller's workspace may be: its data dir, home and files. */
function servePlaces(dataDir?: string): ProtectedPlaces {
  return runnerPlaces({
    dataDir: dataDir ?? defaultDataDir(),
    home: Deno.env.get("HOME"),
  });
}

/**
 * A registry agent runs (and first installs) a program the operator did not
 * name: a caller may ask for one only when it is the operator's own provider,
 * or under `--allow-custom-commands`.
 */
function checkRegistryProvider(
  serve: Pick<ServeConfig, "allowCustomCommands" | "runDefaults">,
  provider: unknown,
): void {
  if (provider === undefined || serve.allowCustomCommands) return;
  const wanted = String(provider).trim();
  if (registryIdOf(wanted) === undefined) return;
  if (
    wanted === String(parseRunDefaults(serve.runDefaults).provider ?? "").trim()
  ) return;
  throw new RunnerError(
    "http.forbidden",
    `provider=${wanted} names an agent of the ACP registry, which the operator has not chosen; the server accepts a registry agent per request only when it is the operator's own --provider, or when started with --allow-custom-commands. Use a preset provider (GET /v1/providers).`,
    { detail: { key: "provider" } },
  );
}
