/**
 * Turns a run config into what starting the agent needs: argv, environment
 * (allow-list plus env-json), working directory and the secrets to redact.
 *
 * @module
 */

import { buildAgentEnv } from "./env.ts";
import type { RunConfig } from "../config.ts";
import { type CommandSource, resolveProvider } from "./providers.ts";
import { secretsOf } from "../secrets.ts";

/** What starting one agent needs. */
export interface AgentCommand {
  /** Program and arguments. */
  argv: string[];
  /** The command that runs: as configured, or the preset's executable or fallback. */
  commandText: string;
  /** Where the command came from: `acp-command`, the preset agent's own executable (found on the agent's PATH), or its pinned fallback. */
  commandSource?: CommandSource;
  /** A preset's executable and fallback, for a machine that chooses by its own PATH (ssh). */
  choices?: { executable: string[]; fallback: string[] };
  /** Names the agent whichever command runs (for session keys). */
  sessionCommand?: string;
  /** The agent's whole environment. */
  env: Record<string, string>;
  /** The agent's working directory. */
  cwd: string;
  /** Values to redact from anything reported. */
  secrets: string[];
}

/** Options for {@linkcode prepareAgentCommand}. */
export interface PrepareCommandOptions {
  /** The runner's own environment (defaults to `Deno.env.toObject()`). */
  environment?: Record<string, string>;
  /** Working directory when the config has no workspace. */
  fallbackCwd?: string;
}

/** Resolves provider, environment and directory for a run config. */
export function prepareAgentCommand(
  config: RunConfig,
  options: PrepareCommandOptions = {},
): AgentCommand {
  const wanted = { provider: config.provider, acpCommand: config.acpCommand };
  const environment = options.environment ?? Deno.env.toObject();
  const env = buildAgentEnv({
    source: environment,
    presetNames: resolveProvider(wanted).envNames,
    overlay: config.envJson,
  });
  // A preset's own executable is looked up on the agent's PATH.
  const provider = resolveProvider({ ...wanted, path: env.PATH ?? "" });
  return {
    argv: provider.argv,
    commandText: provider.commandText,
    commandSource: provider.source,
    choices: provider.choices,
    sessionCommand: provider.sessionCommand,
    env,
    cwd: config.workspace ?? options.fallbackCwd ?? Deno.cwd(),
    secrets: secretsOf({
      envJson: config.envJson,
      environment,
      secretNames: config.secretEnvNames,
    }),
  };
}
