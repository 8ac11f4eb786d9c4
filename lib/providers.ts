/**
 * Providers: {@linkcode resolveProvider} turns `provider` + `acp-command` into
 * the argv to launch: `acp-command` when given, else the preset agent's own
 * executable when it is on the agent's `PATH`, else its pinned `npx`
 * fallback (`preset_pins.ts`). The presets themselves, and the agents
 * that are deliberately not presets, are listed in `presets.ts`.
 *
 * @module
 */

import type { AgentCommand, CommandSource } from "./agent/launch.ts";
import { buildAgentEnv } from "./agent/env.ts";
import {
  planSandbox,
  sandboxArgv,
  sandboxAvailability,
  type SandboxPlan,
} from "./agent/sandbox.ts";
import type { RunConfig } from "./config.ts";
import { secretsOf } from "./secrets.ts";
import { closestName } from "./closest_name.ts";
import { RunnerError } from "./errors.ts";
import { splitCommand } from "./agent/shell_words.ts";
import { findOnPath } from "./agent/find_executable.ts";
import {
  executableArgv,
  fallbackArgv,
  PRESET_PINS,
  type PresetPin,
} from "./agent/preset_pins.ts";

export {
  PROVIDER_PRESETS,
  type ProviderPreset,
  type RecoverySignal,
  UNSUPPORTED_PROVIDERS,
  type UnsupportedProvider,
} from "./agent/presets.ts";
import {
  PROVIDER_PRESETS,
  type RecoverySignal,
  UNSUPPORTED_PROVIDERS,
  type UnsupportedProvider,
} from "./agent/presets.ts";

/** The provider name that takes its command from `acp-command`. */
export const CUSTOM_PROVIDER = "custom";

/** What {@linkcode resolveProvider} needs. */
export interface ResolveProviderOptions {
  /** The `provider` config value. */
  provider: string;
  /** The `acp-command` config value; overrides a preset's command. */
  acpCommand?: string;
  /**
   * The agent's `PATH`: a preset's own executable found there is used
   * instead of its fallback. Undefined: never look (the fallback).
   */
  path?: string;
}

export type { CommandSource } from "./agent/launch.ts";

/** A provider resolved to the command to launch. */
export interface ResolvedProvider {
  /** The provider name (`custom` for custom commands). */
  name: string;
  /** The command split into words (the program as found on PATH). */
  argv: string[];
  /** The command as configured, or the preset's executable or fallback. */
  commandText: string;
  /** Where the command came from. */
  source: CommandSource;
  /** A preset's own executable and pinned fallback (absent with acp-command). */
  choices?: { executable: string[]; fallback: string[] };
  /** Names the agent whichever command runs: acp-command, or the preset's own executable (for session keys). */
  sessionCommand: string;
  /** Extra environment variable names to pass through (empty for `custom`). */
  envNames: string[];
  /** Verified session-recovery signals (empty for `custom`: the agent's `initialize` answer decides). */
  recovery: string[];
}

/**
 * Resolves `provider` and the optional `acp-command` override to the argv to
 * launch, the env names to let through and the verified recovery signals.
 *
 * @throws {RunnerError} `config.invalid` for `custom` without a command or an
 * unparsable command; `provider.not_supported` for a known non-preset agent;
 * `provider.unknown` for any other name.
 */
export function resolveProvider(
  options: ResolveProviderOptions,
): ResolvedProvider {
  const name = options.provider.trim();
  const override = options.acpCommand?.trim() ? options.acpCommand : undefined;
  if (name === CUSTOM_PROVIDER) {
    if (override === undefined) {
      throw new RunnerError(
        "config.invalid",
        'provider=custom needs acp-command: set it to the command that starts an ACP stdio server, e.g. acp-command="opencode acp".',
      );
    }
    return {
      name,
      argv: splitCommand(override),
      commandText: override,
      source: "configured",
      sessionCommand: override,
      envNames: [],
      recovery: [],
    };
  }
  const preset = PROVIDER_PRESETS.find((candidate) => candidate.name === name);
  if (preset !== undefined) {
    const envNames = [...(preset.envNames ?? [])];
    const recovery = [...preset.recovery];
    if (override !== undefined) {
      const argv = splitCommand(override);
      return {
        name,
        argv,
        commandText: override,
        source: "configured",
        sessionCommand: override,
        envNames,
        recovery,
      };
    }
    return {
      name,
      ...presetCommand(PRESET_PINS[name], options.path),
      envNames,
      recovery,
    };
  }
  const unsupported = UNSUPPORTED_PROVIDERS.find((candidate) =>
    candidate.name === name
  );
  if (unsupported !== undefined) {
    const suggestion = unsupported.suggestedCommand ??
      "<the command that starts its ACP stdio server>";
    throw new RunnerError(
      "provider.not_supported",
      `${name} is not a built-in provider: ${unsupported.reason} To use it anyway, set provider=custom and acp-command="${suggestion}".`,
      { detail: { provider: name } },
    );
  }
  const meant = closestName(name, providerNames());
  throw new RunnerError(
    "provider.unknown",
    `Unknown provider ${JSON.stringify(name)}${
      meant ? ` (did you mean ${meant}?)` : ""
    }; use one of ${
      providerNames().join(", ")
    }, or provider=custom with acp-command.`,
    { detail: { provider: name } },
  );
}

/** A preset's command on a machine whose agent `PATH` is `path`. */
function presetCommand(
  pin: PresetPin,
  path: string | undefined,
): Pick<
  ResolvedProvider,
  "argv" | "commandText" | "source" | "choices" | "sessionCommand"
> {
  const executable = executableArgv(pin);
  const fallback = fallbackArgv(pin);
  const found = path === undefined ? undefined : findOnPath(pin.bin, path);
  const chosen = found ? executable : fallback;
  return {
    argv: found ? [found, ...pin.args] : fallback,
    commandText: chosen.join(" "),
    source: found ? "executable" : "fallback",
    choices: { executable, fallback },
    sessionCommand: executable.join(" "),
  };
}

/** Every valid `provider` value: the presets, then `custom`. */
export function providerNames(): string[] {
  return [...PROVIDER_PRESETS.map((preset) => preset.name), CUSTOM_PROVIDER];
}

/** One preset as `runner providers --json` and the HTTP API show it. */
export interface PresetListing {
  /** The `provider` value. */
  name: string;
  /** The command this machine would run (with the runner's `PATH`). */
  command: string;
  /** `executable` (the agent's own, found on PATH) or `fallback`. */
  uses: CommandSource;
  /** The agent's own command. */
  executable: string;
  /** The pinned npx command used when the executable is not on PATH. */
  fallback: string;
  /** The pin: package, exact version (null: unpinned), date checked, how, the platforms it installs on (and why not on the others), and what else it needs. */
  pin: Omit<PresetPin, "bin" | "args">;
  /** Verified session-recovery signals. */
  recovery: readonly RecoverySignal[];
  /** Extra environment variable names passed through. */
  envNames: readonly string[];
}

/** Both provider tables, for `runner providers --json` and the HTTP API. */
export function listProviders(path = Deno.env.get("PATH")): {
  presets: PresetListing[];
  unsupported: readonly UnsupportedProvider[];
} {
  const presets = PROVIDER_PRESETS.map((preset) => {
    const pin = PRESET_PINS[preset.name];
    const resolved = presetCommand(pin, path ?? "");
    return {
      name: preset.name,
      command: resolved.commandText,
      uses: resolved.source,
      executable: executableArgv(pin).join(" "),
      fallback: fallbackArgv(pin).join(" "),
      pin: {
        package: pin.package,
        version: pin.version,
        checked: pin.checked,
        evidence: pin.evidence,
        ...(pin.native ? { native: pin.native } : {}),
        platforms: pin.platforms,
        ...(pin.notOn ? { notOn: pin.notOn } : {}),
        node: pin.node,
        ...(pin.requires ? { requires: pin.requires } : {}),
      },
      recovery: preset.recovery,
      envNames: preset.envNames ?? [],
    };
  });
  return { presets, unsupported: UNSUPPORTED_PROVIDERS };
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
