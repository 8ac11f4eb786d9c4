/**
 * The one table of what each provider preset starts: the agent's own
 * executable (used when it is on the agent's `PATH`), and the npm package
 * and exact version its `npx` fallback runs, with the date each pin was
 * checked, the platforms it installs on and what else it needs.
 *
 * A pin counts as installable on a platform only when npm would install a
 * working program there: for an agent shipped as a native program, its
 * platform package for that os and cpu exists at the pinned version. The
 * registry answers behind these entries are recorded in
 * `tests/fixtures/preset_pins_registry.json` by `scripts/check_pins.ts`;
 * after changing a pin, re-run that script (a test compares the two).
 *
 * @module
 */

/** How a pin was checked. */
export type PinEvidence =
  /** Three real runs through the runner (probe, runs, session reuse, cancel). */
  | "runs"
  /** Checked on the registry only (package, platform packages, engines); the agent was not run. */
  | "registry"
  /** The registry reachable on the check date did not have the package: unpinned. */
  | "not-found";

/** The platforms every pin is checked for: where the agents' programs ship. */
export const PIN_PLATFORMS = [
  "linux-x64",
  "linux-arm64",
  "darwin-x64",
  "darwin-arm64",
] as const;

/** One platform, as `<os>-<cpu>` in npm's and Node's names. */
export type PinPlatform = typeof PIN_PLATFORMS[number];

/**
 * Where a pin's native program comes from: a package whose
 * `optionalDependencies` name one platform package per platform (ending in
 * `-linux-x64`, …), all at `version`.
 */
export interface NativeProgram {
  /** The pin's own package, or the dependency (pinned exactly) that carries the program. */
  from: string;
  /** That package's exact version. */
  version: string;
}

/** One preset's commands. */
export interface PresetPin {
  /** The agent's own program, as installed (`npm i -g` puts it on PATH). */
  bin: string;
  /** Arguments for both the program and the fallback (`--acp`, …). */
  args: readonly string[];
  /** The npm package the fallback runs with `npx -y`. */
  package: string;
  /** The exact version, or null when none could be checked (then unpinned). */
  version: string | null;
  /** When the version was checked (YYYY-MM-DD). */
  checked: string;
  /** How it was checked. */
  evidence: PinEvidence;
  /** The native program, when the agent ships as one; absent: JavaScript that runs wherever Node does. */
  native?: NativeProgram;
  /** The platforms the pin installs on. */
  platforms: readonly PinPlatform[];
  /** For every other platform: why the pin does not install there. */
  notOn?: Readonly<Partial<Record<PinPlatform, string>>>;
  /** The Node versions the package's `engines` accept (npx runs it with the machine's Node); null: it names none. */
  node: string | null;
  /** What else the preset needs that npx does not bring. */
  requires?: readonly string[];
}

const ALL: readonly PinPlatform[] = PIN_PLATFORMS;

/**
 * For each platform in `platforms`: the reason a native program's pin does
 * not install there (npm has nothing to install).
 */
function unpublished(
  native: NativeProgram,
  platforms: readonly PinPlatform[],
): Partial<Record<PinPlatform, string>> {
  return Object.fromEntries(platforms.map((platform) => [
    platform,
    `the registry has no ${platform} package of ${native.from}@${native.version}`,
  ]));
}

const CLAUDE_SDK: NativeProgram = {
  from: "@anthropic-ai/claude-agent-sdk",
  version: "0.3.219",
};
const CODEX: NativeProgram = {
  from: "@zed-industries/codex-acp",
  version: "0.16.0",
};
const DROID: NativeProgram = { from: "droid", version: "0.215.0" };
const KILO: NativeProgram = { from: "@kilocode/cli", version: "7.7.7" };
const OPENCODE: NativeProgram = { from: "opencode-ai", version: "1.18.18" };

/**
 * The pins, by preset name. For the `not-found` packages the program name
 * is npx's own guess (the package name without its scope), unconfirmed.
 * `kilo` and `opencode` are pinned to the newest version whose platform
 * packages the registry has (newer versions have none for linux-x64, or
 * fewer platforms).
 */
export const PRESET_PINS: Readonly<Record<string, PresetPin>> = {
  "auggie": {
    bin: "auggie",
    args: ["--acp"],
    package: "@augmentcode/auggie",
    version: "0.36.0",
    checked: "2026-11-30",
    evidence: "registry",
    platforms: ALL,
    node: ">=20.0.0",
  },
  "autohand": {
    bin: "autohand-acp",
    args: [],
    package: "@autohandai/autohand-acp",
    version: null,
    checked: "2026-11-30",
    evidence: "not-found",
    platforms: [],
    node: null,
  },
  "claude-code": {
    bin: "claude-agent-acp",
    args: [],
    package: "@agentclientprotocol/claude-agent-acp",
    version: "0.62.0",
    checked: "2026-11-30",
    evidence: "runs",
    native: CLAUDE_SDK,
    platforms: ALL,
    node: ">=22",
  },
  "codebuddy-code": {
    bin: "codebuddy-code",
    args: ["--acp"],
    package: "@tencent-ai/codebuddy-code",
    version: null,
    checked: "2026-11-30",
    evidence: "not-found",
    platforms: [],
    node: null,
  },
  "codex": {
    bin: "codex-acp",
    args: [],
    package: "@zed-industries/codex-acp",
    version: "0.16.0",
    checked: "2026-11-30",
    evidence: "runs",
    native: CODEX,
    platforms: ALL,
    node: null,
  },
  "deepagents": {
    bin: "deepagents-acp",
    args: [],
    package: "deepagents-acp",
    version: null,
    checked: "2026-11-30",
    evidence: "not-found",
    platforms: [],
    node: null,
  },
  "dimcode": {
    bin: "dimcode",
    args: ["acp"],
    package: "dimcode",
    version: null,
    checked: "2026-11-30",
    evidence: "not-found",
    platforms: [],
    node: null,
  },
  "dirac": {
    bin: "dirac-cli",
    args: ["--acp"],
    package: "dirac-cli",
    version: null,
    checked: "2026-11-30",
    evidence: "not-found",
    platforms: [],
    node: null,
  },
  "factory-droid": {
    bin: "droid",
    args: ["exec", "--output-format", "acp-daemon"],
    package: "droid",
    version: "0.215.0",
    checked: "2026-11-30",
    evidence: "registry",
    native: DROID,
    platforms: ["linux-x64"],
    notOn: unpublished(DROID, ["linux-arm64", "darwin-x64", "darwin-arm64"]),
    node: ">=20.0.0",
  },
  "gemini": {
    bin: "gemini",
    args: ["--acp"],
    package: "@google/gemini-cli",
    version: "0.61.0",
    checked: "2026-11-30",
    evidence: "runs",
    platforms: ALL,
    node: ">=20",
  },
  "glm-agent": {
    bin: "glm-acp-agent",
    args: [],
    package: "glm-acp-agent",
    version: null,
    checked: "2026-11-30",
    evidence: "not-found",
    platforms: [],
    node: null,
  },
  "kilo": {
    bin: "kilo",
    args: ["acp"],
    package: "@kilocode/cli",
    version: "7.7.7",
    checked: "2026-12-01",
    evidence: "registry",
    native: KILO,
    platforms: ["linux-x64"],
    notOn: unpublished(KILO, ["linux-arm64", "darwin-x64", "darwin-arm64"]),
    node: null,
  },
  "opencode": {
    bin: "opencode",
    args: ["acp"],
    package: "opencode-ai",
    version: "1.18.18",
    checked: "2026-12-01",
    evidence: "registry",
    native: OPENCODE,
    platforms: ["linux-x64", "linux-arm64"],
    notOn: unpublished(OPENCODE, ["darwin-x64", "darwin-arm64"]),
    node: null,
  },
  "pi-acp": {
    bin: "pi-acp",
    args: [],
    package: "pi-acp",
    version: "0.0.34",
    checked: "2026-11-30",
    evidence: "registry",
    platforms: ALL,
    node: ">=20",
    requires: [
      "`pi` 0.81.0 or later on PATH, which pi-acp starts (npm i -g @earendil-works/pi-coding-agent; Node >=22.19.0)",
    ],
  },
  "qwen-code": {
    bin: "qwen",
    args: ["--acp", "--experimental-skills"],
    package: "@qwen-code/qwen-code",
    version: "0.24.4",
    checked: "2026-11-30",
    evidence: "registry",
    platforms: ALL,
    node: ">=22.0.0",
  },
};

/** The agent's own command line for a pin (`codex-acp`, `gemini --acp`). */
export function executableArgv(pin: PresetPin): string[] {
  return [pin.bin, ...pin.args];
}

/** The pinned fallback command line (`npx -y @google/gemini-cli@0.61.0 --acp`). */
export function fallbackArgv(pin: PresetPin): string[] {
  const spec = pin.version ? `${pin.package}@${pin.version}` : pin.package;
  return ["npx", "-y", spec, ...pin.args];
}

/**
 * What a pin needs besides `npx` itself: the Node versions its package
 * accepts and anything npx does not install (empty when nothing).
 */
export function pinNeeds(pin: PresetPin): string[] {
  return [...(pin.node ? [`Node ${pin.node}`] : []), ...(pin.requires ?? [])];
}

/** The platform this process runs on, as a {@linkcode PinPlatform} name (`win32-x64` elsewhere). */
export function currentPlatform(): string {
  const os = Deno.build.os === "windows" ? "win32" : Deno.build.os;
  const cpu = Deno.build.arch === "x86_64" ? "x64" : "arm64";
  return `${os}-${cpu}`;
}

/** What {@linkcode pinStartHint} needs besides the pin. */
export interface PinHintOptions {
  /** The preset's name. */
  name: string;
  /** Which of the preset's commands ran. */
  source: "executable" | "fallback";
  /** The platform it ran on (default: this one). */
  platform?: string;
}

/**
 * What to tell a user whose preset agent did not start: what the preset
 * needs besides npx, and, for the fallback, whether its pin installs on this
 * platform at all. Undefined when there is nothing to add.
 */
export function pinStartHint(
  pin: PresetPin,
  options: PinHintOptions,
): string | undefined {
  const { name, source, platform = currentPlatform() } = options;
  const install =
    `install the agent so \`${pin.bin}\` is on the agent's PATH, or set acp-command`;
  const parts: string[] = [];
  if (source === "fallback" && pin.version === null) {
    parts.push(
      `${name}'s fallback is unpinned: the npm registry had no ${pin.package} when it was checked (${pin.checked}); ${install}.`,
    );
  } else if (
    source === "fallback" &&
    !pin.platforms.includes(platform as PinPlatform)
  ) {
    const reason = pin.notOn?.[platform as PinPlatform] ??
      `it was not checked for ${platform}`;
    parts.push(
      `${pin.package}@${pin.version} does not install on ${platform} (${reason}); ${install}.`,
    );
  }
  const needs = pinNeeds(pin);
  if (needs.length) parts.push(`${name} needs ${needs.join("; ")}.`);
  return parts.length ? parts.join(" ") : undefined;
}
