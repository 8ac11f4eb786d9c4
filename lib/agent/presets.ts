/**
 * The built-in provider presets (ACP agents whose session recovery has been
 * verified) and the ACP agents that are deliberately not presets, with the
 * environment each preset lets through. `providers.ts` resolves them into
 * commands (`agent/preset_pins.ts` pins those).
 *
 * `envNames` lists the extra environment variables a preset lets through to
 * the agent (credentials, endpoints, config locations its docs name). The
 * base allow-list (PATH, HOME, …) and `env-json` are applied elsewhere; any
 * variable not listed here can still be passed with `env-json`.
 *
 * @module
 */

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
  /** The agent's own state (`~/…`), read-write under `sandbox=confined` (`docs/sandbox.md`). */
  stateDirs?: readonly string[];
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
    stateDirs: ["~/.augment"],
    envNames: ["AUGMENT_SESSION_AUTH"],
  },
  {
    name: "autohand",
    recovery: ["loadSession", "session/resume"],
  },
  {
    name: "claude-code",
    recovery: ["loadSession", "session/resume"],
    stateDirs: ["~/.claude", "~/.claude.json"],
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
    stateDirs: ["~/.codex"],
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
    stateDirs: ["~/.factory"],
    envNames: ["FACTORY_API_KEY"],
  },
  {
    name: "gemini",
    recovery: ["loadSession"],
    stateDirs: ["~/.gemini"],
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
    stateDirs: [
      "~/.config/opencode",
      "~/.local/share/opencode",
      "~/.local/state/opencode",
      "~/.cache/opencode",
    ],
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
    stateDirs: ["~/.qwen"],
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
