/**
 * Turns a run config into what starting the agent needs: argv, environment
 * (allow-list plus env-json), working directory and the secrets to redact.
 *
 * @module
 */

import { buildAgentEnv } from "./env.ts";
import type { RunConfig } from "../config.ts";
import { resolveProvider } from "../providers.ts";
import { secretsOf } from "../secrets.ts";

/** What starting one agent needs. */
export interface AgentLaunch {
  /** Program and arguments. */
  argv: string[];
  /** The command as configured (for logs and store keys). */
  commandText: string;
  /** Where the command came from: `acp-command`, the preset agent's own executable, or its pinned fallback. */
  commandSource?: "configured" | "executable" | "fallback";
  /** The agent's whole environment. */
  env: Record<string, string>;
  /** The agent's working directory. */
  cwd: string;
  /** Values to redact from anything reported. */
  secrets: string[];
}

/** Options for {@linkcode prepareAgentLaunch}. */
export interface PrepareLaunchOptions {
  /** The runner's own environment (defaults to `Deno.env.toObject()`). */
  environment?: Record<string, string>;
  /** Working directory when the config has no workspace. */
  fallbackCwd?: string;
}

/** Resolves provider, environment and directory for a run config. */
export function prepareAgentLaunch(
  config: RunConfig,
  options: PrepareLaunchOptions = {},
): AgentLaunch {
  const provider = resolveProvider({
    provider: config.provider,
    acpCommand: config.acpCommand,
  });
  const environment = options.environment ?? Deno.env.toObject();
  const env = buildAgentEnv({
    source: environment,
    presetNames: provider.envNames,
    overlay: config.envJson,
  });
  return {
    argv: provider.argv,
    commandText: provider.commandText,
    env,
    cwd: config.workspace ?? options.fallbackCwd ?? Deno.cwd(),
    secrets: secretsOf({
      envJson: config.envJson,
      environment,
      secretNames: config.secretEnvNames,
    }),
  };
}
