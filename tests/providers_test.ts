import { isDeepStrictEqual } from "node:util";
import { RunnerError } from "../lib/errors.ts";
import {
  formatProvidersTable,
  listProviders,
  providerNames,
  resolveProvider,
} from "../lib/providers.ts";

function assertEquals(actual: unknown, expected: unknown, context = ""): void {
  if (!isDeepStrictEqual(actual, expected)) {
    throw new Error(
      `${context ? context + ": " : ""}expected ${
        JSON.stringify(expected)
      }, got ${JSON.stringify(actual)}`,
    );
  }
}

function assertIncludes(text: string, part: string): void {
  if (!text.includes(part)) {
    throw new Error(
      `expected ${JSON.stringify(text)} to include ${JSON.stringify(part)}`,
    );
  }
}

function catchRunnerError(fn: () => unknown): RunnerError {
  try {
    fn();
  } catch (error) {
    if (error instanceof RunnerError) return error;
    throw error;
  }
  throw new Error("expected a RunnerError");
}

/** The preset table of the Python product's README, copied by hand. */
const SEED_PRESETS: [string, string, string[]][] = [
  ["auggie", "npx -y @augmentcode/auggie --acp", ["loadSession"]],
  ["autohand", "npx -y @autohandai/autohand-acp", [
    "loadSession",
    "session/resume",
  ]],
  [
    "claude-code",
    "npx -y @agentclientprotocol/claude-agent-acp@0.62.0",
    ["loadSession", "session/resume"],
  ],
  ["codebuddy-code", "npx -y @tencent-ai/codebuddy-code --acp", [
    "loadSession",
  ]],
  ["codex", "npx -y @zed-industries/codex-acp", [
    "loadSession",
    "session/resume",
  ]],
  ["deepagents", "npx -y deepagents-acp", ["loadSession"]],
  ["dimcode", "npx -y dimcode acp", ["loadSession", "session/resume"]],
  ["dirac", "npx -y dirac-cli --acp", ["loadSession"]],
  [
    "factory-droid",
    "npx -y droid exec --output-format acp-daemon",
    ["loadSession", "session/resume"],
  ],
  ["gemini", "npx -y @google/gemini-cli --acp", ["loadSession"]],
  ["glm-agent", "npx -y glm-acp-agent", ["loadSession", "session/resume"]],
  ["kilo", "npx -y @kilocode/cli acp", ["loadSession", "session/resume"]],
  ["opencode", "opencode acp", ["loadSession", "session/resume"]],
  ["pi-acp", "npx -y pi-acp", ["loadSession"]],
  [
    "qwen-code",
    "npx -y @qwen-code/qwen-code --acp --experimental-skills",
    ["loadSession", "session/resume"],
  ],
];

const NOT_PRESETS = [
  "agoragentic",
  "cline",
  "cursor",
  "github-copilot",
  "goose",
  "kimi",
  "langcli",
  "nova",
  "qoder",
  "sigit",
];

Deno.test("every preset resolves to its default command and recovery signals", () => {
  for (const [name, command, recovery] of SEED_PRESETS) {
    const resolved = resolveProvider({ provider: name });
    assertEquals(resolved.name, name);
    assertEquals(resolved.commandText, command, name);
    assertEquals(resolved.argv, command.split(" "), name);
    assertEquals(resolved.recovery, recovery, name);
    assertEquals(Array.isArray(resolved.envNames), true);
  }
  assertEquals(providerNames(), [
    ...SEED_PRESETS.map(([name]) => name),
    "custom",
  ]);
});

Deno.test("presets let through the credentials their agents read", () => {
  const envOf = (provider: string) => resolveProvider({ provider }).envNames;
  for (
    const name of [
      "ANTHROPIC_API_KEY",
      "ANTHROPIC_BASE_URL",
      "CLAUDE_CODE_USE_BEDROCK",
    ]
  ) {
    assertEquals(envOf("claude-code").includes(name), true, name);
  }
  for (const name of ["OPENAI_API_KEY", "CODEX_HOME"]) {
    assertEquals(envOf("codex").includes(name), true, name);
  }
  for (
    const name of ["GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_CLOUD_PROJECT"]
  ) {
    assertEquals(envOf("gemini").includes(name), true, name);
  }
  for (
    const name of ["DASHSCOPE_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"]
  ) {
    assertEquals(envOf("qwen-code").includes(name), true, name);
  }
  assertEquals(envOf("opencode").includes("OPENCODE_CONFIG"), true);
  assertEquals(envOf("codex").includes("ANTHROPIC_API_KEY"), false);
});

Deno.test("acp-command overrides a preset's command but keeps its env and recovery", () => {
  const resolved = resolveProvider({
    provider: "codex",
    acpCommand: "/opt/codex-acp --profile 'work laptop'",
  });
  assertEquals(resolved.argv, ["/opt/codex-acp", "--profile", "work laptop"]);
  assertEquals(resolved.commandText, "/opt/codex-acp --profile 'work laptop'");
  assertEquals(resolved.recovery, ["loadSession", "session/resume"]);
  assertEquals(resolved.envNames.includes("OPENAI_API_KEY"), true);
  assertEquals(
    resolveProvider({ provider: "codex", acpCommand: "  " }).commandText,
    "npx -y @zed-industries/codex-acp",
  );
});

Deno.test("custom uses acp-command and requires it", () => {
  assertEquals(
    resolveProvider({ provider: "custom", acpCommand: "goose acp" }),
    {
      name: "custom",
      argv: ["goose", "acp"],
      commandText: "goose acp",
      envNames: [],
      recovery: [],
    },
  );
  for (const acpCommand of [undefined, "", "   "]) {
    const error = catchRunnerError(() =>
      resolveProvider({ provider: "custom", acpCommand })
    );
    assertEquals(error.code, "config.invalid");
    assertIncludes(error.message, "provider=custom needs acp-command");
  }
  const unclosed = catchRunnerError(() =>
    resolveProvider({ provider: "custom", acpCommand: "agent 'acp" })
  );
  assertEquals(unclosed.code, "config.invalid");
});

Deno.test("goose is refused with the reason and a custom hint", () => {
  const error = catchRunnerError(() => resolveProvider({ provider: "goose" }));
  assertEquals(error.code, "provider.not_supported");
  assertEquals(error.retryable, false);
  assertEquals(
    error.message,
    "goose is not a built-in provider: Upstream docs say ACP providers do not support session resume or fork yet. " +
      'To use it anyway, set provider=custom and acp-command="goose acp".',
  );
});

Deno.test("every not-preset is refused with its seed reason", () => {
  const { unsupported } = listProviders();
  assertEquals(unsupported.map((entry) => entry.name), NOT_PRESETS);
  for (const entry of unsupported) {
    const error = catchRunnerError(() =>
      resolveProvider({ provider: entry.name })
    );
    assertEquals(error.code, "provider.not_supported", entry.name);
    assertIncludes(
      error.message,
      `${entry.name} is not a built-in provider: ${entry.reason}`,
    );
    assertIncludes(error.message, "set provider=custom and acp-command=");
  }
  const agoragentic = unsupported.find((entry) => entry.name === "agoragentic");
  assertEquals(
    agoragentic?.reason,
    "`initialize` reports `loadSession: false` and no `session/resume`.",
  );
});

Deno.test("an unknown provider lists the valid names", () => {
  const error = catchRunnerError(() => resolveProvider({ provider: "claude" }));
  assertEquals(error.code, "provider.unknown");
  assertIncludes(error.message, '"claude"');
  for (const name of providerNames()) assertIncludes(error.message, name);
});

Deno.test("the providers table shows presets, commands, recovery and not-presets", () => {
  const text = formatProvidersTable();
  for (const [name, command] of SEED_PRESETS) {
    const line = text.split("\n").find((row) =>
      row.trim().startsWith(`${name} `)
    );
    assertIncludes(line ?? "", command);
  }
  assertIncludes(text, "loadSession, session/resume");
  assertIncludes(text, "provider=custom");
  for (const entry of listProviders().unsupported) {
    assertIncludes(text, `${entry.name}: ${entry.reason}`);
  }
});
