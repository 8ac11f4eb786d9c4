/**
 * Turns a run config into what starting the agent needs: argv, environment
 * (allow-list plus env-json), working directory and the secrets to redact.
 *
 * @module
 */

import { buildAgentEnv } from "./env.ts";
import { PROVIDER_PRESETS } from "./presets.ts";
import {
  planSandbox,
  sandboxArgv,
  sandboxAvailability,
  type SandboxPlan,
} from "./sandbox.ts";
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
  /** How the agent is confined (`sandbox=confined` on this machine); `argv` then starts bwrap. */
  sandbox?: SandboxPlan;
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
  const cwd = config.workspace ?? options.fallbackCwd ?? Deno.cwd();
  const sandbox = confinement(config, { env, cwd, argv: provider.argv });
  if (sandbox) env.TMPDIR &&= "/tmp";
  return {
    argv: sandbox
      ? sandboxArgv(
        sandboxAvailability().bwrap ?? "bwrap",
        sandbox,
        provider.argv,
        cwd,
      )
      : provider.argv,
    commandText: provider.commandText,
    commandSource: provider.source,
    choices: provider.choices,
    sessionCommand: provider.sessionCommand,
    env,
    cwd,
    secrets: secretsOf({
      envJson: config.envJson,
      environment,
      secretNames: config.secretEnvNames,
    }),
    sandbox,
  };
}

/** The sandbox plan of a run whose agent starts on this machine, when it asks for one. */
function confinement(
  config: RunConfig,
  agent: { env: Record<string, string>; cwd: string; argv: string[] },
): SandboxPlan | undefined {
  // A remote-ssh or hub-side daemon run starts nothing here.
  if (config.sandbox !== "confined" || config.location !== "local") {
    return undefined;
  }
  const preset = PROVIDER_PRESETS.find((entry) =>
    entry.name === config.provider
  );
  return planSandbox({
    network: config.sandboxNetwork,
    workspace: agent.cwd,
    env: agent.env,
    stateDirs: preset?.stateDirs,
    readPaths: config.sandboxReadPaths,
    writePaths: config.sandboxWritePaths,
    program: agent.argv[0],
  });
}
