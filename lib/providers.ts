/**
 * Providers: {@linkcode resolveProvider} turns `provider` + `acp-command` into
 * the argv to launch: `acp-command` when given, else the preset agent's own
 * executable when it is on the agent's `PATH`, else its pinned `npx`
 * fallback (`preset_pins.ts`). The presets themselves, and the agents
 * that are deliberately not presets, are listed in `presets.ts`. Any other
 * name is an ACP registry agent's id: {@linkcode resolveRegistryProvider}
 * looks it up (and installs a binary) first, `docs/registry.md`.
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
import { quoteCommand, splitCommand } from "./agent/shell_words.ts";
import { catalogueAgeNote, loadCatalogue } from "./agent/registry/source.ts";
import {
  isRegistryId,
  isRegistryVersion,
  type RegistryAgent,
} from "./agent/registry/catalogue.ts";
import { planLaunch } from "./agent/registry/launch_plan.ts";
import { installAgent, installedAgent } from "./agent/registry/installs.ts";
import type { DownloadProgress } from "./agent/registry/download.ts";
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
  /** The registry agent `provider` names, as {@linkcode resolveRegistryProvider} resolved it. */
  registry?: RegistryLaunch;
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
  if (options.registry && registryIdOf(name) === options.registry.id) {
    return registryCommand(name, override, options.registry);
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
  throw unknownProvider(name, []);
}

/** A registry agent's command (or `acp-command`, which overrides it). */
function registryCommand(
  name: string,
  override: string | undefined,
  registry: RegistryLaunch,
): ResolvedProvider {
  const argv = override === undefined ? registry.argv : splitCommand(override);
  return {
    name,
    argv,
    commandText: override ?? quoteCommand(argv),
    source: override === undefined ? "registry" : "configured",
    sessionCommand: override ?? `${REGISTRY_PREFIX}${registry.id}`,
    ...(override === undefined && registry.choices
      ? { choices: registry.choices }
      : {}),
    envNames: [],
    recovery: [],
  };
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

/** The prefix that names a registry agent even where a preset or a known non-preset has its id (`registry:goose`). */
export const REGISTRY_PREFIX = "registry:";

/**
 * The registry id a `provider` value names, or undefined for a preset,
 * `custom` or a known non-preset (the seed's names keep their meaning).
 */
export function registryIdOf(provider: string): string | undefined {
  const name = provider.trim();
  if (name.startsWith(REGISTRY_PREFIX)) {
    return name.slice(REGISTRY_PREFIX.length);
  }
  if (name === CUSTOM_PROVIDER) return undefined;
  if (PROVIDER_PRESETS.some((preset) => preset.name === name)) return undefined;
  if (UNSUPPORTED_PROVIDERS.some((entry) => entry.name === name)) {
    return undefined;
  }
  return name;
}

/** A registry agent resolved to what a place runs. */
export interface RegistryLaunch {
  /** The registry id. */
  id: string;
  /** The version that runs. */
  version: string;
  /** The distribution that runs; `elsewhere`: a daemon resolves it for its own platform (a hub's daemon run). */
  kind: "binary" | "npx" | "uvx" | "elsewhere";
  /** The command. */
  argv: string[];
  /** The environment the registry gives the agent (under `env-json`). */
  env: Record<string, string>;
  /** A binary's install directory: what a confined run may read. */
  installDir?: string;
  /** Over ssh, a binary-only agent: its program when the remote `PATH` has it, else the refusal. */
  choices?: { executable: string[]; fallback: string[] };
}

/** What {@linkcode resolveRegistryProvider} needs besides the config. */
export interface RegistryContext {
  /** The runner's data dir (the registry's cache, `agents/`). */
  dataDir: string;
  /** Fetch the registry whatever the cache's age. */
  refresh?: boolean;
  /** The operator's sha256 of the archive, checked when it is downloaded. */
  sha256?: string;
  /** Progress of a download this call makes. */
  onProgress?: (
    progress: DownloadProgress & { id: string; version: string },
  ) => void;
  /** A note for the operator: the registry is a cached copy (and how old), or entries were skipped. */
  onNote?: (note: string) => void;
}

/**
 * A registry agent's command for a run config, its binary installed on this
 * machine first when that is what runs here (`location=local`, or a daemon's
 * job). Undefined for presets, `custom` and known non-presets; for a hub's
 * daemon run only the name (the daemon resolves it for its own platform).
 *
 * @throws {RunnerError} `provider.unknown` (with suggestions from the
 * presets and the registry), `registry.unreachable`,
 * `agent.no_distribution`, `agent.version_unavailable`, or an install's
 * failure.
 */
export async function resolveRegistryProvider(
  config: RegistryConfig,
  context: RegistryContext,
): Promise<RegistryLaunch | undefined> {
  const plan = await planRegistryProvider(config, context);
  return plan && "launch" in plan ? plan.launch : await plan?.install();
}

/** The config keys a registry agent is resolved from. */
export type RegistryConfig = Pick<
  RunConfig,
  | "provider"
  | "acpCommand"
  | "location"
  | "providerVersion"
  | "registryUrl"
  | "registryRefresh"
  | "remoteShell"
>;

/** A registry agent resolved: what runs, or the download and install still to make before it can. */
export type RegistryPlan =
  | { launch: RegistryLaunch }
  | {
    /** The registry id. */
    id: string;
    /** The version to install. */
    version: string;
    /** Downloads and installs it (progress also goes to `onProgress`). */
    install(
      onProgress?: RegistryContext["onProgress"],
    ): Promise<RegistryLaunch>;
  };

/**
 * Like {@linkcode resolveRegistryProvider}, but leaves a binary that is not
 * installed yet to the caller: every refusal that needs no download
 * (unknown id, no distribution, version unavailable) is thrown here.
 */
export async function planRegistryProvider(
  config: RegistryConfig,
  context: RegistryContext,
): Promise<RegistryPlan | undefined> {
  const id = registryIdOf(config.provider);
  if (id === undefined || config.acpCommand?.trim()) return undefined;
  // Ids and versions name directories: nothing else is looked up.
  if (!isRegistryId(id)) throw unknownProvider(config.provider.trim(), []);
  checkProviderVersion(config.providerVersion);
  if (config.location === "daemon") {
    // The hub names the agent; the daemon installs it for its own platform.
    return {
      launch: {
        id,
        version: config.providerVersion ?? "",
        kind: "elsewhere",
        argv: [`${REGISTRY_PREFIX}${id}`],
        env: {},
      },
    };
  }
  const wanted = config.providerVersion;
  // An installed version the config names runs without the registry.
  if (wanted && config.location === "local") {
    const ready = installedAgent(context.dataDir, id, wanted);
    if (ready) return { launch: installedLaunch(ready) };
  }
  const { agent, url } = await registryAgentNamed(id, config, context);
  if (wanted && wanted !== agent.version) {
    throw versionUnavailable(id, wanted, agent.version, url);
  }
  const plan = planLaunch(agent, {
    where: config.location === "remote-ssh" ? "remote" : "here",
    remoteShell: config.remoteShell,
  });
  if (plan.kind === "remote-path") {
    return { launch: remotePathLaunch(id, agent, plan) };
  }
  if (plan.kind !== "binary") {
    return {
      launch: {
        id,
        version: agent.version,
        kind: plan.kind,
        argv: plan.argv,
        env: plan.env,
      },
    };
  }
  const { version } = agent;
  const ready = installedAgent(context.dataDir, id, version);
  if (ready) return { launch: installedLaunch(ready) };
  return {
    id,
    version,
    async install(onProgress) {
      const { installed } = await installAgent({
        dataDir: context.dataDir,
        id,
        version,
        platform: plan.platform,
        target: plan.target,
        sha256: context.sha256,
        onProgress: (progress) => {
          const shown = { ...progress, id, version };
          context.onProgress?.(shown);
          onProgress?.(shown);
        },
      });
      return installedLaunch(installed);
    },
  };
}

/**
 * The version a hub pins a daemon's registry agent to: the run's
 * `provider-version`, else what the hub's registry lists now. Undefined for
 * anything but a registry agent run on a daemon.
 *
 * @throws {RunnerError} `provider.unknown` or `registry.unreachable` from the
 * hub's registry.
 */
export async function daemonRegistryVersion(
  config: RegistryConfig,
  context: RegistryContext,
): Promise<string | undefined> {
  if (config.location !== "daemon" || config.acpCommand?.trim()) {
    return undefined;
  }
  const id = registryIdOf(config.provider);
  if (id === undefined || !isRegistryId(id)) return undefined;
  if (config.providerVersion) return config.providerVersion;
  const { agent } = await registryAgentNamed(id, config, context);
  return agent.version;
}

function versionUnavailable(
  id: string,
  wanted: string,
  listed: string,
  url: string,
): RunnerError {
  return new RunnerError(
    "agent.version_unavailable",
    `${id} ${wanted} is not installed here and the registry (${url}) now lists ${listed}. Drop provider-version to run ${listed}, or refresh the registry the version came from (runner providers --registry --refresh); on a daemon, the hub pinned ${wanted} from its own registry: give this daemon a --registry-url that lists it.`,
    { detail: { id, wanted, listed } },
  );
}

/** Refuses a `provider-version` that is not a plain version (it names a directory). */
function checkProviderVersion(version: string | undefined): void {
  if (!version || isRegistryVersion(version)) return;
  throw new RunnerError(
    "config.invalid",
    `provider-version: must be a plain version such as 1.2.3 (got ${
      JSON.stringify(version)
    })`,
    { detail: { key: "provider-version" } },
  );
}

/** A binary agent a remote machine runs from its own `PATH`, or says why not. */
function remotePathLaunch(
  id: string,
  agent: RegistryAgent,
  plan: { argv: string[]; env: Record<string, string>; missing: string },
): RegistryLaunch {
  return {
    id,
    version: agent.version,
    kind: "binary",
    argv: plan.argv,
    env: plan.env,
    choices: {
      executable: plan.argv,
      // The remote shell execs this when the program is not on its PATH.
      fallback: [
        "sh",
        "-c",
        'printf "%s\\n" "$0" >&2; exit 127',
        plan.missing,
      ],
    },
  };
}

/** The registry's entry for `id`. */
async function registryAgentNamed(
  id: string,
  config: Pick<RunConfig, "provider" | "registryUrl" | "registryRefresh">,
  context: RegistryContext,
): Promise<{ agent: RegistryAgent; url: string }> {
  let loaded;
  try {
    loaded = await loadCatalogue({
      url: config.registryUrl,
      dataDir: context.dataDir,
      refreshSeconds: config.registryRefresh,
      refresh: context.refresh,
    });
  } catch (error) {
    // Offline, a near miss of a preset may be a typo: say so.
    const meant = config.provider.trim().startsWith(REGISTRY_PREFIX)
      ? undefined
      : closestName(id, providerNames());
    if (!meant || !(error instanceof RunnerError)) throw error;
    throw new RunnerError(
      error.code,
      `${error.message} ${
        JSON.stringify(id)
      } is not a preset: did you mean ${meant}?`,
      { detail: { ...error.detail, suggestion: meant } },
    );
  }
  const note = catalogueAgeNote(loaded);
  if (note) context.onNote?.(note);
  const { skipped } = loaded.catalogue;
  if (loaded.from === "network" && skipped.length) {
    context.onNote?.(
      `registry: skipped ${skipped.length} malformed ${
        skipped.length === 1 ? "entry" : "entries"
      } of ${loaded.url}: ${
        skipped.slice(0, 5).map((entry) =>
          `${entry.id ?? `#${entry.index}`} (${entry.reason})`
        ).join("; ")
      }`,
    );
  }
  const agent = loaded.catalogue.agents.find((entry) => entry.id === id);
  if (!agent) {
    const skipped = loaded.catalogue.skipped.find((entry) => entry.id === id);
    throw unknownProvider(
      config.provider.trim(),
      loaded.catalogue.agents,
      skipped ? ` (its registry entry is malformed: ${skipped.reason})` : "",
    );
  }
  return { agent, url: loaded.url };
}

function installedLaunch(
  installed: ReturnType<typeof installedAgent> & object,
): RegistryLaunch {
  return {
    id: installed.receipt.id,
    version: installed.receipt.version,
    kind: "binary",
    argv: [installed.program, ...installed.receipt.args],
    env: installed.receipt.env,
    installDir: installed.dir,
  };
}

/** `provider.unknown` for `name`, with the closest preset or registry id. */
function unknownProvider(
  name: string,
  agents: readonly RegistryAgent[],
  why = "",
): RunnerError {
  const ids = agents.map((agent) => agent.id);
  const bare = name.replace(REGISTRY_PREFIX, "");
  const meant = closestName(bare, [...providerNames(), ...ids]);
  const exact = meant && !name.startsWith(REGISTRY_PREFIX)
    ? `; a registry agent of exactly that name is provider=${REGISTRY_PREFIX}${bare}`
    : "";
  return new RunnerError(
    "provider.unknown",
    `Unknown provider ${JSON.stringify(name)}${why}${
      meant ? ` (did you mean ${meant}?)` : ""
    }: it is neither a preset (${
      providerNames().join(", ")
    }) nor an agent of the registry (runner providers --registry lists them)${exact}; or use provider=custom with acp-command.`,
    { detail: { provider: name, ...(meant ? { suggestion: meant } : {}) } },
  );
}

/** Options for {@linkcode prepareAgentCommand}. */
export interface PrepareCommandOptions {
  /** The runner's own environment (defaults to `Deno.env.toObject()`). */
  environment?: Record<string, string>;
  /** Working directory when the config has no workspace. */
  fallbackCwd?: string;
  /** The registry agent `provider` names, resolved ({@linkcode resolveRegistryProvider}). */
  registry?: RegistryLaunch;
}

/** Resolves provider, environment and directory for a run config. */
export function prepareAgentCommand(
  config: RunConfig,
  options: PrepareCommandOptions = {},
): AgentCommand {
  const wanted = {
    provider: config.provider,
    acpCommand: config.acpCommand,
    registry: options.registry,
  };
  const environment = options.environment ?? Deno.env.toObject();
  const env = buildAgentEnv({
    source: environment,
    presetNames: resolveProvider(wanted).envNames,
    overlay: { ...options.registry?.env, ...config.envJson },
  });
  // A preset's own executable is looked up on the agent's PATH.
  const provider = resolveProvider({ ...wanted, path: env.PATH ?? "" });
  const cwd = config.workspace ?? options.fallbackCwd ?? Deno.cwd();
  const installDir = provider.source === "registry"
    ? options.registry?.installDir
    : undefined;
  const sandbox = confinement(config, {
    env,
    cwd,
    argv: provider.argv,
    installDir,
  });
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
    ...(installDir ? { installDir } : {}),
  };
}

/** The sandbox plan of a run whose agent starts on this machine, when it asks for one. */
function confinement(
  config: RunConfig,
  agent: {
    env: Record<string, string>;
    cwd: string;
    argv: string[];
    installDir?: string;
  },
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
    // An installed registry agent is read-only to its own run.
    readPaths: [
      ...config.sandboxReadPaths,
      ...(agent.installDir ? [agent.installDir] : []),
    ],
    writePaths: config.sandboxWritePaths,
    program: agent.argv[0],
  });
}
