/**
 * The agent's environment, built from an allow-list: nothing of the runner's
 * own environment reaches the agent unless listed here, declared by the
 * provider preset, or put there by the user's `env-json`.
 *
 * @module
 */

/** Variable names every agent receives when the runner has them. */
export const BASE_ENV_ALLOW_LIST: readonly string[] = [
  "HOME",
  "PATH",
  "LANG",
  "TERM",
  "USER",
  "LOGNAME",
  "SHELL",
  "TMPDIR",
];

/** Options for {@linkcode buildAgentEnv}. */
export interface AgentEnvOptions {
  /** The runner's environment (defaults to `Deno.env.toObject()`). */
  source?: Record<string, string>;
  /** Extra names the provider preset lets through. */
  presetNames?: readonly string[];
  /** The user's `env-json` overlay; wins over everything else. */
  overlay?: Record<string, string>;
}

/** Builds the agent's whole environment from the allow-list plus the overlay. */
export function buildAgentEnv(
  options: AgentEnvOptions = {},
): Record<string, string> {
  const source = options.source ?? Deno.env.toObject();
  const allowed = new Set([
    ...BASE_ENV_ALLOW_LIST,
    ...(options.presetNames ?? []),
  ]);
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(source)) {
    if (allowed.has(name) || name.startsWith("LC_")) env[name] = value;
  }
  return { ...env, ...(options.overlay ?? {}) };
}
