import assert from "node:assert/strict";
import { RunnerError } from "../lib/errors.ts";
import {
  formatProvidersTable,
  listProviders,
  providerNames,
  resolveProvider,
} from "../lib/providers.ts";

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

/**
 * The not-presets of the Python product's README with its reasons, copied by
 * hand, and the command our message suggests for each (our own addition).
 */
const NOT_PRESETS: [string, string, string | undefined][] = [
  [
    "agoragentic",
    "`initialize` reports `loadSession: false` and no `session/resume`.",
    undefined,
  ],
  [
    "cline",
    "Headless `initialize` did not complete during verification, so session recovery could not be confirmed.",
    "cline --acp",
  ],
  [
    "cursor",
    "Public reports show `loadSession: true` is advertised, but `session/load` fails for ACP-created sessions.",
    "agent acp",
  ],
  [
    "github-copilot",
    "Registry npx launch did not start a usable ACP binary during verification.",
    "copilot --acp",
  ],
  [
    "goose",
    "Upstream docs say ACP providers do not support session resume or fork yet.",
    "goose acp",
  ],
  [
    "kimi",
    "Public issue reports ACP load/switch starts with blank history even though CLI history exists.",
    "kimi acp",
  ],
  [
    "langcli",
    "No registry/npm-verifiable ACP stdio package was available during verification.",
    undefined,
  ],
  [
    "nova",
    "Headless `initialize` did not complete during verification, so session recovery could not be confirmed.",
    undefined,
  ],
  [
    "qoder",
    "Public report shows ACP-created sessions cannot be loaded across process restarts despite `loadSession: true`.",
    "qodercli --acp",
  ],
  [
    "sigit",
    "Packaged binary could not be verified in the test environment and no public session recovery evidence was found.",
    undefined,
  ],
];

Deno.test("every preset resolves to its default command and recovery signals", () => {
  for (const [name, command, recovery] of SEED_PRESETS) {
    const resolved = resolveProvider({ provider: name });
    assert.equal(resolved.name, name);
    assert.equal(resolved.commandText, command, name);
    assert.deepEqual(resolved.argv, command.split(" "), name);
    assert.deepEqual(resolved.recovery, recovery, name);
    assert.equal(Array.isArray(resolved.envNames), true);
  }
  assert.deepEqual(providerNames(), [
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
    assert.equal(envOf("claude-code").includes(name), true, name);
  }
  for (const name of ["OPENAI_API_KEY", "CODEX_HOME"]) {
    assert.equal(envOf("codex").includes(name), true, name);
  }
  for (
    const name of ["GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_CLOUD_PROJECT"]
  ) {
    assert.equal(envOf("gemini").includes(name), true, name);
  }
  for (
    const name of ["DASHSCOPE_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"]
  ) {
    assert.equal(envOf("qwen-code").includes(name), true, name);
  }
  assert.equal(envOf("opencode").includes("OPENCODE_CONFIG"), true);
  assert.equal(envOf("codex").includes("ANTHROPIC_API_KEY"), false);
});

Deno.test("acp-command overrides a preset's command but keeps its env and recovery", () => {
  const resolved = resolveProvider({
    provider: "codex",
    acpCommand: "/opt/codex-acp --profile 'work laptop'",
  });
  assert.deepEqual(resolved.argv, [
    "/opt/codex-acp",
    "--profile",
    "work laptop",
  ]);
  assert.equal(resolved.commandText, "/opt/codex-acp --profile 'work laptop'");
  assert.deepEqual(resolved.recovery, ["loadSession", "session/resume"]);
  assert.equal(resolved.envNames.includes("OPENAI_API_KEY"), true);
  assert.equal(
    resolveProvider({ provider: "codex", acpCommand: "  " }).commandText,
    "npx -y @zed-industries/codex-acp",
  );
});

Deno.test("custom uses acp-command and requires it", () => {
  assert.deepEqual(
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
    assert.throws(
      () => resolveProvider({ provider: "custom", acpCommand }),
      (error) => {
        assert.ok(error instanceof RunnerError);
        assert.equal(error.code, "config.invalid");
        assert.match(error.message, /provider=custom needs acp-command/);
        return true;
      },
    );
  }
  assert.throws(
    () => resolveProvider({ provider: "custom", acpCommand: "agent 'acp" }),
    (error) => {
      assert.ok(error instanceof RunnerError);
      assert.equal(error.code, "config.invalid");
      return true;
    },
  );
});

Deno.test("goose is refused with the reason and a custom hint", () => {
  assert.throws(() => resolveProvider({ provider: "goose" }), (error) => {
    assert.ok(error instanceof RunnerError);
    assert.equal(error.code, "provider.not_supported");
    assert.equal(error.retryable, false);
    assert.equal(
      error.message,
      "goose is not a built-in provider: Upstream docs say ACP providers do not support session resume or fork yet. " +
        'To use it anyway, set provider=custom and acp-command="goose acp".',
    );
    return true;
  });
});

Deno.test("every not-preset is refused with its seed reason", () => {
  const { unsupported } = listProviders();
  assert.deepEqual(
    unsupported.map((entry) => entry.name),
    NOT_PRESETS.map(([name]) => name),
  );
  for (const [name, reason, command] of NOT_PRESETS) {
    assert.throws(() => resolveProvider({ provider: name }), (error) => {
      assert.ok(error instanceof RunnerError);
      assert.equal(error.code, "provider.not_supported", name);
      assert.equal(error.retryable, false);
      assert.equal(
        error.message,
        `${name} is not a built-in provider: ${reason} To use it anyway, ` +
          `set provider=custom and acp-command="${
            command ?? "<the command that starts its ACP stdio server>"
          }".`,
      );
      return true;
    });
  }
});

Deno.test("an unknown provider lists the valid names", () => {
  assert.throws(() => resolveProvider({ provider: "claude" }), (error) => {
    assert.ok(error instanceof RunnerError);
    assert.equal(error.code, "provider.unknown");
    assert.match(error.message, /"claude"/);
    for (const name of providerNames()) {
      assert.match(error.message, new RegExp(RegExp.escape(name)));
    }
    return true;
  });
});

Deno.test("the providers table shows presets, commands, recovery and not-presets", () => {
  const text = formatProvidersTable();
  for (const [name, command] of SEED_PRESETS) {
    const line = text.split("\n").find((row) =>
      row.trim().startsWith(`${name} `)
    );
    assert.match(line ?? "", new RegExp(RegExp.escape(command)));
  }
  assert.match(text, /loadSession, session\/resume/);
  assert.match(text, /provider=custom/);
  for (const [name, reason] of NOT_PRESETS) {
    assert.match(text, new RegExp(RegExp.escape(`${name}: ${reason}`)));
  }
});
