/**
 * `runner probe <provider>`: readiness and capabilities of an agent.
 *
 * @module
 */

import { choiceLines, choicesJson } from "./probe_choices.ts";
import { join } from "node:path";
import { createReaperRegistry, reapLeftoverGroups } from "../agent/reaper.ts";
import { defaultDataDir } from "../store/data_dir.ts";
import { type AgentCommand } from "../agent/launch.ts";
import { prepareAgentCommand, resolveRegistryProvider } from "../providers.ts";
import { installReporting } from "./install_progress.ts";
import {
  parseFlags,
  registryUrlFromEnv,
  reportFailure,
  reportUsageError,
} from "./args.ts";
import { parseRunConfig, type RunConfig } from "../config.ts";
import { sandboxAvailability } from "../agent/sandbox.ts";
import { sandboxNetworkAvailability } from "../agent/sandbox_network.ts";
import { RunnerError } from "../errors.ts";
import { pinStartHint, PRESET_PINS } from "../agent/preset_pins.ts";
import {
  PROBE_OUTCOMES,
  probeAgent,
  type ProbeReport,
  type ProbeSandbox,
  RECOVERY_PROMPT,
} from "../probe.ts";

/** Help text of `runner probe`. */
export const PROBE_HELP = `Usage: runner probe <provider> [options]

Checks whether an ACP agent is usable: the initialize handshake, then one
session/new in the workspace. <provider> is a preset, custom, or an ACP
registry agent's id (installed first when it ships as a binary).

Options:
  --acp-command CMD          the agent command (required for provider=custom)
  --workspace DIR            directory for session/new (default: current)
  --env-json JSON            extra environment for the agent
  --initialize-timeout SEC   handshake deadline (default 30)
  --auth-method ID           call authenticate with this authMethods id first
  --handshake-only           skip session/new
  --recovery                 prove cross-process session recovery: sends one
                             short prompt ("${RECOVERY_PROMPT}"), which
                             costs one small model call, restarts the agent and
                             resumes or loads the session
  --no-prompt                with --recovery: do not prompt (free, but agents
                             that save only prompted sessions then give
                             inconclusive)
  --prompt-timeout SEC       deadline of that prompt (default 120)
  --json                     print the report as JSON
  --data-dir DIR             where agent process records, the registry's cache
                             and installed agents live (default: user data dir)
  --registry-url URL         the ACP agent registry (default: the official one)
  --provider-version VER     a registry agent's version (default: the registry's)
  --sandbox MODE             off (default) or confined: probe the agent in the
                             sandbox a run with this config gets (docs/sandbox.md)
  --sandbox-network MODE     with confined: full (default: the internet, not
                             the host's loopback), none, or host (the host's
                             network, its loopback services included)
  --sandbox-read-paths LIST  with confined: more paths the agent may read
  --sandbox-write-paths LIST with confined: more paths it may write

Outcomes and exit codes: ${
  Object.entries(PROBE_OUTCOMES).map(([name, code]) => `${name}=${code}`).join(
    ", ",
  )
}
`;

/** Runs `runner probe`; returns the exit code. */
export async function probeCommand(args: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseFlags({
      args,
      allowPositionals: true,
      options: {
        "acp-command": { type: "string" },
        workspace: { type: "string" },
        "env-json": { type: "string" },
        "initialize-timeout": { type: "string" },
        "auth-method": { type: "string" },
        "max-message-mb": { type: "string" },
        "handshake-only": { type: "boolean" },
        "data-dir": { type: "string" },
        "registry-url": { type: "string" },
        "provider-version": { type: "string" },
        recovery: { type: "boolean" },
        "no-prompt": { type: "boolean" },
        "prompt-timeout": { type: "string" },
        json: { type: "boolean" },
        sandbox: { type: "string" },
        "sandbox-network": { type: "string" },
        "sandbox-read-paths": { type: "string" },
        "sandbox-write-paths": { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    });
  } catch (error) {
    return reportUsageError(error, "probe");
  }
  const { values, positionals } = parsed;
  if (values.help) {
    console.log(PROBE_HELP);
    return 0;
  }
  let launch, config, promptTimeout;
  try {
    config = parseRunConfig({
      provider: positionals[0],
      "acp-command": values["acp-command"],
      workspace: values.workspace ?? Deno.cwd(),
      "env-json": values["env-json"],
      "initialize-timeout": values["initialize-timeout"],
      "max-message-mb": values["max-message-mb"],
      sandbox: values.sandbox,
      "sandbox-network": values["sandbox-network"],
      "sandbox-read-paths": values["sandbox-read-paths"],
      "sandbox-write-paths": values["sandbox-write-paths"],
      // The probe opens sessions without the run's assets.
      "langbot-assets-enabled": false,
      "auth-method": values["auth-method"],
      "registry-url": values["registry-url"] ?? registryUrlFromEnv(),
      "provider-version": values["provider-version"],
    });
    promptTimeout = parsePromptTimeout(values["prompt-timeout"]);
    launch = await probeLaunch(config, values["data-dir"]);
  } catch (error) {
    return reportFailure(error);
  }
  const agentsDir = join(values["data-dir"] ?? defaultDataDir(), "agents");
  await reapLeftoverGroups(agentsDir);
  const report = await probeAgent({
    registry: createReaperRegistry(agentsDir),
    launch,
    initializeTimeoutMs: config.initializeTimeout * 1000,
    handshakeOnly: values["handshake-only"],
    recovery: values.recovery,
    recoveryPrompt: !values["no-prompt"],
    promptTimeoutMs: promptTimeout * 1000,
    maxMessageBytes: config.maxMessageMb * 1024 * 1024,
    authMethod: config.authMethod,
    startHint: startHint(config.provider, launch.commandSource),
  });
  report.sandbox = probeSandbox(config);
  if (values.json) {
    console.log(JSON.stringify(probeReportJson(report), null, 2));
  } else console.log(formatProbeReport(report));
  return report.exitCode;
}

/** Whether this machine can confine agents, and what this config gets. */
function probeSandbox(config: RunConfig): ProbeSandbox {
  const network = config.sandbox === "confined"
    ? config.sandboxNetwork
    : undefined;
  const bwrap = sandboxAvailability();
  // A confined run with the default network also needs pasta.
  const { available, reason } = bwrap.available && network === "full"
    ? sandboxNetworkAvailability()
    : bwrap;
  return { available, reason, mode: config.sandbox, network };
}

/** `--prompt-timeout` in seconds (default 120). */
function parsePromptTimeout(raw: string | undefined): number {
  if (raw === undefined) return 120;
  const seconds = Number(raw);
  if (!raw.trim() || !Number.isFinite(seconds) || seconds <= 0) {
    throw new RunnerError(
      "config.invalid",
      `--prompt-timeout: must be a number of seconds greater than 0 (got "${raw}")`,
    );
  }
  return Math.min(seconds, 2_147_483);
}

/** The probed agent's command; a registry agent's binary is installed first. */
async function probeLaunch(
  config: RunConfig,
  dataDir = defaultDataDir(),
): Promise<AgentCommand> {
  const reporting = installReporting();
  const registry = await resolveRegistryProvider(config, {
    dataDir,
    ...reporting,
  }).finally(reporting.finish);
  return prepareAgentCommand(config, { registry });
}

/** A preset's requirements, for a probe whose agent does not start. */
function startHint(
  provider: string,
  source: AgentCommand["commandSource"],
): string | undefined {
  const pin = Object.hasOwn(PRESET_PINS, provider)
    ? PRESET_PINS[provider]
    : undefined;
  if (!pin || (source !== "executable" && source !== "fallback")) return;
  return pinStartHint(pin, { name: provider, source });
}

const SOURCE_NOTES = {
  configured: "acp-command",
  executable: "the agent's own executable, found on PATH",
  fallback: "the preset's pinned fallback: its executable is not on PATH",
  registry: "the ACP registry's agent, installed on first use",
} as const;

/** Human-readable probe report. */
export function formatProbeReport(report: ProbeReport): string {
  const source = report.commandSource
    ? ` (${SOURCE_NOTES[report.commandSource]})`
    : "";
  const lines = [
    `outcome: ${report.outcome}`,
    `command: ${report.command}${source}`,
  ];
  if (report.agentInfo !== undefined) lines.push(...capabilityLines(report));
  if (report.sessionOk) {
    lines.push("session/new: ok", ...choiceLines(report.sessionChoices));
  }
  if (report.recoveryPrompted !== undefined) {
    lines.push(
      `recovery check: ${
        report.recoveryPrompted
          ? "one short prompt, then a fresh agent process"
          : "no prompt (--no-prompt), then a fresh agent process"
      }`,
    );
  }
  if (report.recovery) lines.push(`recovery: ${report.recovery}`);
  if (report.error) {
    lines.push(`error [${report.error.code}]: ${report.error.message}`);
    if (report.outcome === "unauthenticated" && report.authMethods?.length) {
      lines.push(
        `the agent lists these auth methods: ${
          report.authMethods.map((m) => `${m.id} (${m.name})`).join(", ")
        }`,
      );
    }
  }
  if (report.hint) lines.push(`hint: ${report.hint}`);
  if (report.sandbox) lines.push(sandboxLine(report.sandbox));
  if (report.stderrTail) lines.push("stderr (tail):", report.stderrTail);
  return lines.join("\n");
}

function sandboxLine(sandbox: ProbeSandbox): string {
  const here = sandbox.available
    ? "available"
    : `unavailable (${sandbox.reason})`;
  const mode = sandbox.mode === "confined"
    ? `confined, network ${sandbox.network}`
    : "off";
  return `sandbox: ${here}; this run: ${mode}`;
}

function capabilityLines(report: ProbeReport): string[] {
  const caps = report.capabilities ?? {};
  const sessionCaps = Object.keys(caps.sessionCapabilities ?? {})
    .filter((key) => key !== "_meta");
  const methods = (report.authMethods ?? []).map((method) =>
    method.name ?? method.id
  );
  return [
    `agent: ${JSON.stringify(report.agentInfo)}`,
    `protocol version: ${report.protocolVersion}`,
    `loadSession: ${Boolean(caps.loadSession)}`,
    `sessionCapabilities: ${sessionCaps.join(", ") || "none"}`,
    `promptCapabilities: ${JSON.stringify(caps.promptCapabilities ?? {})}`,
    `mcpCapabilities: ${JSON.stringify(caps.mcpCapabilities ?? {})}`,
    `authMethods: ${methods.join(", ") || "none"}`,
  ];
}

/**
 * The report as `--json` prints it: snake_case keys like every other JSON
 * the runner prints; the agent's own ACP objects (`agent_info`,
 * `capabilities`, `auth_methods`) as the agent sent them.
 */
export function probeReportJson(report: ProbeReport): Record<string, unknown> {
  return {
    outcome: report.outcome,
    exit_code: report.exitCode,
    command: report.command,
    agent_info: report.agentInfo,
    protocol_version: report.protocolVersion,
    capabilities: report.capabilities,
    auth_methods: report.authMethods,
    command_source: report.commandSource,
    session_ok: report.sessionOk,
    session_choices: choicesJson(report.sessionChoices),
    recovery_prompted: report.recoveryPrompted,
    recovery: report.recovery,
    error: report.error,
    stderr_tail: report.stderrTail,
    hint: report.hint,
    sandbox: report.sandbox,
  };
}
