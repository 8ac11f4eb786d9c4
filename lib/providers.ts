/**
 * The built-in provider presets (ACP agents whose session recovery has been
 * verified), the ACP agents that are deliberately not presets, and
 * {@linkcode resolveProvider}, which turns `provider` + `acp-command` into the
 * argv to launch: `acp-command` when given, else the preset agent's own
 * executable when it is on the agent's `PATH`, else its pinned `npx`
 * fallback (`agent/preset_pins.ts`).
 *
 * `envNames` lists the extra environment variables a preset lets through to
 * the agent (credentials, endpoints, config locations its docs name). The
 * base allow-list (PATH, HOME, …) and `env-json` are applied elsewhere; any
 * variable not listed here can still be passed with `env-json`.
 *
 * @module
 */

import { RunnerError } from "./errors.ts";
import { splitCommand } from "./agent/shell_words.ts";
import { findOnPath } from "./agent/find_executable.ts";
import {
  executableArgv,
  fallbackArgv,
  PRESET_PINS,
  type PresetPin,
} from "./agent/preset_pins.ts";

/** A session-recovery signal an agent advertises. */
export type RecoverySignal = "loadSession" | "session/resume";

/** A built-in provider preset (its commands are in `agent/preset_pins.ts`). */
export interface ProviderPreset {
  /** The `provider` value. */
  name: string;
  /** The session-recovery signals verified for this agent. */
  recovery: readonly RecoverySignal[];
  /** Extra environment variable names passed through to the agent. */
  envNames?: readonly string[];
}

/** A known ACP agent that is deliberately not a preset. */
export interface UnsupportedProvider {
  /** The name users are likely to type. */
  name: string;
  /** Why it is not a preset. */
  reason: string;
  /** A command to try with `provider=custom`, when one is known. */
  suggestedCommand?: string;
}

const ANTHROPIC = ["ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"] as const;
const OPENAI = ["OPENAI_API_KEY", "OPENAI_BASE_URL"] as const;

/** The built-in presets, in the order `runner providers` shows them. */
export const PROVIDER_PRESETS: readonly ProviderPreset[] = [
  {
    name: "auggie",
    recovery: ["loadSession"],
    envNames: ["AUGMENT_SESSION_AUTH"],
  },
  {
    name: "autohand",
    recovery: ["loadSession", "session/resume"],
  },
  {
    name: "claude-code",
    recovery: ["loadSession", "session/resume"],
    envNames: [
      ...ANTHROPIC,
      "ANTHROPIC_AUTH_TOKEN",
      "ANTHROPIC_MODEL",
      "CLAUDE_CONFIG_DIR",
      "CLAUDE_CODE_USE_BEDROCK",
      "CLAUDE_CODE_USE_VERTEX",
      "ANTHROPIC_VERTEX_PROJECT_ID",
      "CLOUD_ML_REGION",
      "AWS_REGION",
      "AWS_PROFILE",
      "AWS_ACCESS_KEY_ID",
      "AWS_SECRET_ACCESS_KEY",
      "AWS_SESSION_TOKEN",
      "GOOGLE_APPLICATION_CREDENTIALS",
    ],
  },
  {
    name: "codebuddy-code",
    recovery: ["loadSession"],
    envNames: ["CODEBUDDY_API_KEY"],
  },
  {
    name: "codex",
    recovery: ["loadSession", "session/resume"],
    envNames: [...OPENAI, "CODEX_HOME"],
  },
  {
    name: "deepagents",
    recovery: ["loadSession"],
    envNames: [...ANTHROPIC, ...OPENAI],
  },
  {
    name: "dimcode",
    recovery: ["loadSession", "session/resume"],
  },
  {
    name: "dirac",
    recovery: ["loadSession"],
  },
  {
    name: "factory-droid",
    recovery: ["loadSession", "session/resume"],
    envNames: ["FACTORY_API_KEY"],
  },
  {
    name: "gemini",
    recovery: ["loadSession"],
    envNames: [
      "GEMINI_API_KEY",
      "GOOGLE_API_KEY",
      "GOOGLE_CLOUD_PROJECT",
      "GOOGLE_CLOUD_LOCATION",
      "GOOGLE_GENAI_USE_VERTEXAI",
      "GOOGLE_APPLICATION_CREDENTIALS",
      "GEMINI_MODEL",
    ],
  },
  {
    name: "glm-agent",
    recovery: ["loadSession", "session/resume"],
  },
  {
    name: "kilo",
    recovery: ["loadSession", "session/resume"],
  },
  {
    name: "opencode",
    recovery: ["loadSession", "session/resume"],
    envNames: [
      "OPENCODE_CONFIG",
      "OPENCODE_CONFIG_DIR",
      ...ANTHROPIC,
      ...OPENAI,
      "OPENROUTER_API_KEY",
      "GEMINI_API_KEY",
    ],
  },
  {
    name: "pi-acp",
    recovery: ["loadSession"],
    envNames: ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"],
  },
  {
    name: "qwen-code",
    recovery: ["loadSession", "session/resume"],
    envNames: ["DASHSCOPE_API_KEY", ...OPENAI, "OPENAI_MODEL"],
  },
];

/** ACP agents that are not presets, with the reason (as verified by the Python product). */
export const UNSUPPORTED_PROVIDERS: readonly UnsupportedProvider[] = [
  {
    name: "agoragentic",
    reason:
      "`initialize` reports `loadSession: false` and no `session/resume`.",
  },
  {
    name: "cline",
    reason:
      "Headless `initialize` did not complete during verification, so session recovery could not be confirmed.",
    suggestedCommand: "cline --acp",
  },
  {
    name: "cursor",
    reason:
      "Public reports show `loadSession: true` is advertised, but `session/load` fails for ACP-created sessions.",
    suggestedCommand: "agent acp",
  },
  {
    name: "github-copilot",
    reason:
      "Registry npx launch did not start a usable ACP binary during verification.",
    suggestedCommand: "copilot --acp",
  },
  {
    name: "goose",
    reason:
      "Upstream docs say ACP providers do not support session resume or fork yet.",
    suggestedCommand: "goose acp",
  },
  {
    name: "kimi",
    reason:
      "Public issue reports ACP load/switch starts with blank history even though CLI history exists.",
    suggestedCommand: "kimi acp",
  },
  {
    name: "langcli",
    reason:
      "No registry/npm-verifiable ACP stdio package was available during verification.",
  },
  {
    name: "nova",
    reason:
      "Headless `initialize` did not complete during verification, so session recovery could not be confirmed.",
  },
  {
    name: "qoder",
    reason:
      "Public report shows ACP-created sessions cannot be loaded across process restarts despite `loadSession: true`.",
    suggestedCommand: "qodercli --acp",
  },
  {
    name: "sigit",
    reason:
      "Packaged binary could not be verified in the test environment and no public session recovery evidence was found.",
  },
];

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

/** Where a resolved command came from. */
export type CommandSource = "configured" | "executable" | "fallback";

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

/** Edits (insert, delete, replace, swap two neighbours) that turn `a` into `b`. */
function editDistance(a: string, b: string): number {
  const rows = Array.from(
    { length: a.length + 1 },
    (_, i) => Array.from({ length: b.length + 1 }, (_, j) => i || j),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      rows[i][j] = Math.min(
        rows[i - 1][j] + 1,
        rows[i][j - 1] + 1,
        rows[i - 1][j - 1] + cost,
      );
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        rows[i][j] = Math.min(rows[i][j], rows[i - 2][j - 2] + 1);
      }
    }
  }
  return rows[a.length][b.length];
}

/**
 * The candidate a mistyped `name` most likely meant: the closest by edit
 * distance, if it is within a third of its length (at least 1, at most 3).
 */
export function closestName(
  name: string,
  candidates: readonly string[],
): string | undefined {
  const typed = name.toLowerCase();
  let best: { candidate: string; distance: number } | undefined;
  for (const candidate of candidates) {
    const distance = editDistance(typed, candidate.toLowerCase());
    if (!best || distance < best.distance) best = { candidate, distance };
  }
  const limit = Math.min(3, Math.max(1, Math.floor(typed.length / 3)));
  return best && best.distance > 0 && best.distance <= limit
    ? best.candidate
    : undefined;
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
  /** The pin: package, exact version (null: unpinned), date checked, how. */
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
      },
      recovery: preset.recovery,
      envNames: preset.envNames ?? [],
    };
  });
  return { presets, unsupported: UNSUPPORTED_PROVIDERS };
}
