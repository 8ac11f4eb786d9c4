/**
 * The one table of what each provider preset starts: the agent's own
 * executable (used when it is on the agent's `PATH`), and the npm package
 * and exact version its `npx` fallback runs, with the date each pin was
 * checked. Bump a version here, and the date with it.
 *
 * @module
 */

/** How a pin was checked. */
export type PinEvidence =
  /** Three real runs through the runner (probe, runs, session reuse, cancel). */
  | "runs"
  /** The registry's latest version on the check date (the agent was not run). */
  | "registry"
  /** The registry reachable on the check date did not have the package: unpinned. */
  | "not-found";

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
}

/**
 * The pins, by preset name. For the `not-found` packages the program name
 * is npx's own guess (the package name without its scope), unconfirmed.
 */
export const PRESET_PINS: Readonly<Record<string, PresetPin>> = {
  "auggie": {
    bin: "auggie",
    args: ["--acp"],
    package: "@augmentcode/auggie",
    version: "0.36.0",
    checked: "2026-11-30",
    evidence: "registry",
  },
  "autohand": {
    bin: "autohand-acp",
    args: [],
    package: "@autohandai/autohand-acp",
    version: null,
    checked: "2026-11-30",
    evidence: "not-found",
  },
  "claude-code": {
    bin: "claude-agent-acp",
    args: [],
    package: "@agentclientprotocol/claude-agent-acp",
    version: "0.62.0",
    checked: "2026-11-30",
    evidence: "runs",
  },
  "codebuddy-code": {
    bin: "codebuddy-code",
    args: ["--acp"],
    package: "@tencent-ai/codebuddy-code",
    version: null,
    checked: "2026-11-30",
    evidence: "not-found",
  },
  "codex": {
    bin: "codex-acp",
    args: [],
    package: "@zed-industries/codex-acp",
    version: "0.16.0",
    checked: "2026-11-30",
    evidence: "runs",
  },
  "deepagents": {
    bin: "deepagents-acp",
    args: [],
    package: "deepagents-acp",
    version: null,
    checked: "2026-11-30",
    evidence: "not-found",
  },
  "dimcode": {
    bin: "dimcode",
    args: ["acp"],
    package: "dimcode",
    version: null,
    checked: "2026-11-30",
    evidence: "not-found",
  },
  "dirac": {
    bin: "dirac-cli",
    args: ["--acp"],
    package: "dirac-cli",
    version: null,
    checked: "2026-11-30",
    evidence: "not-found",
  },
  "factory-droid": {
    bin: "droid",
    args: ["exec", "--output-format", "acp-daemon"],
    package: "droid",
    version: "0.215.0",
    checked: "2026-11-30",
    evidence: "registry",
  },
  "gemini": {
    bin: "gemini",
    args: ["--acp"],
    package: "@google/gemini-cli",
    version: "0.61.0",
    checked: "2026-11-30",
    evidence: "runs",
  },
  "glm-agent": {
    bin: "glm-acp-agent",
    args: [],
    package: "glm-acp-agent",
    version: null,
    checked: "2026-11-30",
    evidence: "not-found",
  },
  "kilo": {
    bin: "kilo",
    args: ["acp"],
    package: "@kilocode/cli",
    version: "7.8.1",
    checked: "2026-11-30",
    evidence: "registry",
  },
  "opencode": {
    bin: "opencode",
    args: ["acp"],
    package: "opencode-ai",
    version: "1.18.33",
    checked: "2026-11-30",
    evidence: "registry",
  },
  "pi-acp": {
    bin: "pi-acp",
    args: [],
    package: "pi-acp",
    version: "0.0.34",
    checked: "2026-11-30",
    evidence: "registry",
  },
  "qwen-code": {
    bin: "qwen",
    args: ["--acp", "--experimental-skills"],
    package: "@qwen-code/qwen-code",
    version: "0.24.4",
    checked: "2026-11-30",
    evidence: "registry",
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
