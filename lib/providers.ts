/**
 * The built-in provider presets (ACP agents whose session recovery has been
 * verified), the ACP agents that are deliberately not presets, and
 * {@linkcode resolveProvider}, which turns `provider` + `acp-command` into the
 * argv to launch.
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

/** A session-recovery signal an agent advertises. */
export type RecoverySignal = "loadSession" | "session/resume";

/** A built-in provider preset. */
export interface ProviderPreset {
  /** The `provider` value. */
  name: string;
  /** The default ACP command line (split with `splitCommand`). */
  command: string;
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
    command: "npx -y @augmentcode/auggie --acp",
    recovery: ["loadSession"],
    envNames: ["AUGMENT_SESSION_AUTH"],
  },
  {
    name: "autohand",
    command: "npx -y @autohandai/autohand-acp",
    recovery: ["loadSession", "session/resume"],
  },
  {
    name: "claude-code",
    command: "npx -y @agentclientprotocol/claude-agent-acp@0.62.0",
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
    command: "npx -y @tencent-ai/codebuddy-code --acp",
    recovery: ["loadSession"],
    envNames: ["CODEBUDDY_API_KEY"],
  },
  {
    name: "codex",
    command: "npx -y @zed-industries/codex-acp",
    recovery: ["loadSession", "session/resume"],
    envNames: [...OPENAI, "CODEX_HOME"],
  },
  {
    name: "deepagents",
    command: "npx -y deepagents-acp",
    recovery: ["loadSession"],
    envNames: [...ANTHROPIC, ...OPENAI],
  },
  {
    name: "dimcode",
    command: "npx -y dimcode acp",
    recovery: ["loadSession", "session/resume"],
  },
  {
    name: "dirac",
    command: "npx -y dirac-cli --acp",
    recovery: ["loadSession"],
  },
  {
    name: "factory-droid",
    command: "npx -y droid exec --output-format acp-daemon",
    recovery: ["loadSession", "session/resume"],
    envNames: ["FACTORY_API_KEY"],
  },
  {
    name: "gemini",
    command: "npx -y @google/gemini-cli --acp",
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
    command: "npx -y glm-acp-agent",
    recovery: ["loadSession", "session/resume"],
  },
  {
    name: "kilo",
    command: "npx -y @kilocode/cli acp",
    recovery: ["loadSession", "session/resume"],
  },
  {
    name: "opencode",
    command: "opencode acp",
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
    command: "npx -y pi-acp",
    recovery: ["loadSession"],
    envNames: ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"],
  },
  {
    name: "qwen-code",
    command: "npx -y @qwen-code/qwen-code --acp --experimental-skills",
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
}

/** A provider resolved to the command to launch. */
export interface ResolvedProvider {
  /** The provider name (`custom` for custom commands). */
  name: string;
  /** The command split into words. */
  argv: string[];
  /** The command as configured (or the preset default). */
  commandText: string;
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
      envNames: [],
      recovery: [],
    };
  }
  const preset = PROVIDER_PRESETS.find((candidate) => candidate.name === name);
  if (preset !== undefined) {
    const commandText = override ?? preset.command;
    return {
      name,
      argv: splitCommand(commandText),
      commandText,
      envNames: [...(preset.envNames ?? [])],
      recovery: [...preset.recovery],
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

/** Both provider tables, for `runner providers --json` and the HTTP API. */
export function listProviders(): {
  presets: readonly ProviderPreset[];
  unsupported: readonly UnsupportedProvider[];
} {
  return { presets: PROVIDER_PRESETS, unsupported: UNSUPPORTED_PROVIDERS };
}

/** The human-readable text `runner providers` prints. */
export function formatProvidersTable(): string {
  const presetRows = PROVIDER_PRESETS.map((preset) => [
    preset.name,
    preset.command,
    preset.recovery.join(", "),
  ]);
  const lines = [
    "Built-in providers (provider=<name>):",
    ...alignColumns([
      ["NAME", "DEFAULT ACP COMMAND", "SESSION RECOVERY"],
      ...presetRows,
    ]),
    "",
    `Any other ACP agent: provider=${CUSTOM_PROVIDER} with acp-command="<command>".`,
    "",
    "Not built in (usable with provider=custom, without verified session recovery):",
    ...UNSUPPORTED_PROVIDERS.map((entry) => `  ${entry.name}: ${entry.reason}`),
  ];
  return lines.join("\n") + "\n";
}

function alignColumns(rows: string[][]): string[] {
  const widths = rows[0].map((_, column) =>
    Math.max(...rows.map((row) => row[column].length))
  );
  return rows.map((row) =>
    "  " +
    row.map((cell, column) =>
      column === row.length - 1 ? cell : cell.padEnd(widths[column])
    ).join("  ")
  );
}
