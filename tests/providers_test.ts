import assert from "node:assert/strict";
import { RunnerError } from "../lib/errors.ts";
import { join } from "node:path";
import { PRESET_PINS } from "../lib/agent/preset_pins.ts";
import { formatProvidersTable } from "../lib/cli/providers.ts";
import {
  listProviders,
  providerNames,
  resolveProvider,
} from "../lib/providers.ts";
import { tempDir } from "./helpers.ts";

/**
 * The presets of the Python product's README, with each agent's own command
 * and the pinned npx fallback (unpinned where the registry had no package on
 * the check date), copied by hand. `kilo` and `opencode` are pinned older
 * than there: the newer versions have no platform package for linux-x64 (or
 * fewer platforms) on the registry.
 */
const SEED_PRESETS: [string, string, string, string[]][] = [
  ["auggie", "auggie --acp", "npx -y @augmentcode/auggie@0.36.0 --acp", [
    "loadSession",
  ]],
  ["autohand", "autohand-acp", "npx -y @autohandai/autohand-acp", [
    "loadSession",
    "session/resume",
  ]],
  [
    "claude-code",
    "claude-agent-acp",
    "npx -y @agentclientprotocol/claude-agent-acp@0.62.0",
    ["loadSession", "session/resume"],
  ],
  [
    "codebuddy-code",
    "codebuddy-code --acp",
    "npx -y @tencent-ai/codebuddy-code --acp",
    ["loadSession"],
  ],
  ["codex", "codex-acp", "npx -y @zed-industries/codex-acp@0.16.0", [
    "loadSession",
    "session/resume",
  ]],
  ["deepagents", "deepagents-acp", "npx -y deepagents-acp", ["loadSession"]],
  ["dimcode", "dimcode acp", "npx -y dimcode acp", [
    "loadSession",
    "session/resume",
  ]],
  ["dirac", "dirac-cli --acp", "npx -y dirac-cli --acp", ["loadSession"]],
  [
    "factory-droid",
    "droid exec --output-format acp-daemon",
    "npx -y droid@0.215.0 exec --output-format acp-daemon",
    ["loadSession", "session/resume"],
  ],
  ["gemini", "gemini --acp", "npx -y @google/gemini-cli@0.61.0 --acp", [
    "loadSession",
  ]],
  ["glm-agent", "glm-acp-agent", "npx -y glm-acp-agent", [
    "loadSession",
    "session/resume",
  ]],
  ["kilo", "kilo acp", "npx -y @kilocode/cli@7.7.7 acp", [
    "loadSession",
    "session/resume",
  ]],
  ["opencode", "opencode acp", "npx -y opencode-ai@1.18.18 acp", [
    "loadSession",
    "session/resume",
  ]],
  ["pi-acp", "pi-acp", "npx -y pi-acp@0.0.34", ["loadSession"]],
  [
    "qwen-code",
    "qwen --acp --experimental-skills",
    "npx -y @qwen-code/qwen-code@0.24.4 --acp --experimental-skills",
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

Deno.test("every preset resolves to its own executable and pinned fallback, and its recovery signals", () => {
  for (const [name, executable, fallback, recovery] of SEED_PRESETS) {
    const resolved = resolveProvider({ provider: name });
    assert.equal(resolved.name, name);
    assert.equal(resolved.commandText, fallback, name);
    assert.equal(resolved.source, "fallback", name);
    assert.deepEqual(resolved.argv, fallback.split(" "), name);
    assert.deepEqual(resolved.choices, {
      executable: executable.split(" "),
      fallback: fallback.split(" "),
    });
    assert.equal(resolved.sessionCommand, executable, name);
    assert.deepEqual(resolved.recovery, recovery, name);
    assert.equal(Array.isArray(resolved.envNames), true);
  }
  assert.deepEqual(providerNames(), [
    ...SEED_PRESETS.map(([name]) => name),
    "custom",
  ]);
});

Deno.test("every fallback is pinned to an exact version, except packages the registry did not have, and each pin has its date", () => {
  for (const [name, pin] of Object.entries(PRESET_PINS)) {
    assert.match(pin.checked, /^\d{4}-\d{2}-\d{2}$/, name);
    if (pin.evidence === "not-found") assert.equal(pin.version, null, name);
    else assert.match(pin.version ?? "", /^\d+\.\d+\.\d+$/, name);
  }
  assert.deepEqual(
    Object.keys(PRESET_PINS).sort(),
    SEED_PRESETS.map(([name]) => name).sort(),
  );
});

Deno.test("a preset uses its own executable when it is on the agent's PATH", () => {
  const bin = tempDir();
  const program = join(bin, "gemini");
  Deno.writeTextFileSync(program, "#!/bin/sh\n");
  Deno.chmodSync(program, 0o644);
  const path = `/nonexistent:${bin}`;
  assert.equal(
    resolveProvider({ provider: "gemini", path }).source,
    "fallback",
  );
  Deno.chmodSync(program, 0o755);
  const resolved = resolveProvider({ provider: "gemini", path });
  assert.equal(resolved.source, "executable");
  assert.equal(resolved.commandText, "gemini --acp");
  assert.deepEqual(resolved.argv, [program, "--acp"]);
  assert.equal(
    resolveProvider({ provider: "gemini", path: "/nonexistent" }).source,
    "fallback",
  );
  const custom = resolveProvider({
    provider: "gemini",
    acpCommand: "gemini --acp --debug",
    path,
  });
  assert.equal(custom.source, "configured");
  assert.equal(custom.choices, undefined);
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
    "npx -y @zed-industries/codex-acp@0.16.0",
  );
});

Deno.test("custom uses acp-command and requires it", () => {
  assert.deepEqual(
    resolveProvider({ provider: "custom", acpCommand: "goose acp" }),
    {
      name: "custom",
      argv: ["goose", "acp"],
      commandText: "goose acp",
      source: "configured",
      sessionCommand: "goose acp",
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

Deno.test("the providers table shows presets, the command used here, recovery and not-presets", () => {
  const bin = tempDir();
  Deno.writeTextFileSync(join(bin, "codex-acp"), "#!/bin/sh\n");
  Deno.chmodSync(join(bin, "codex-acp"), 0o755);
  const text = formatProvidersTable(bin);
  for (const [name, executable, fallback] of SEED_PRESETS) {
    const line = text.split("\n").find((row) =>
      row.trim().startsWith(`${name} `)
    ) ?? "";
    if (name === "codex") {
      assert.match(line, /own executable +codex-acp /);
    } else {
      assert.match(line, new RegExp(RegExp.escape(fallback)));
      assert.match(
        line,
        new RegExp(RegExp.escape(`${executable.split(" ")[0]} not on PATH`)),
      );
    }
  }
  assert.match(text, /loadSession, session\/resume/);
  assert.match(text, /provider=custom/);
  for (const [name, reason] of NOT_PRESETS) {
    assert.match(text, new RegExp(RegExp.escape(`${name}: ${reason}`)));
  }
});

Deno.test("the providers table shows each pin's platforms and what it needs, or why a preset has no pin", () => {
  const text = formatProvidersTable("/nonexistent");
  const section = text.split("Pinned fallbacks")[1].split("\n\n")[0];
  const row = (name: string) =>
    section.split("\n").find((line) => line.trim().startsWith(`${name} `)) ??
      "";
  for (const [name, pin] of Object.entries(PRESET_PINS)) {
    assert.match(
      row(name),
      pin.version
        ? new RegExp(RegExp.escape(`${pin.package}@${pin.version} `))
        : new RegExp(
          RegExp.escape(`unpinned: no ${pin.package} on the registry`),
        ),
      name,
    );
  }
  assert.match(
    row("kilo"),
    /@kilocode\/cli@7\.7\.7 +linux-x64 \(no npm package for linux-arm64, darwin-x64, darwin-arm64\)/,
  );
  assert.match(
    row("claude-code"),
    /linux-x64, linux-arm64, darwin-x64, darwin-arm64 +Node >=22$/,
  );
  assert.match(
    row("gemini"),
    /any platform with Node \(JavaScript\) +Node >=20$/,
  );
  assert.match(row("pi-acp"), /`pi` 0\.81\.0 or later on PATH/);
  assert.match(
    row("pi-acp"),
    /@earendil-works\/pi-coding-agent; Node >=22\.19\.0/,
  );
  const listed = listProviders("/nonexistent").presets;
  const piAcp = listed.find((preset) => preset.name === "pi-acp")!;
  assert.deepEqual(piAcp.pin.requires, PRESET_PINS["pi-acp"].requires);
  const kilo = listed.find((preset) => preset.name === "kilo")!;
  assert.deepEqual(kilo.pin.platforms, ["linux-x64"]);
  assert.deepEqual(Object.keys(kilo.pin.notOn ?? {}), [
    "linux-arm64",
    "darwin-x64",
    "darwin-arm64",
  ]);
});
