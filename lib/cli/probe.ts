/**
 * `runner probe <provider>`: readiness and capabilities of an agent.
 *
 * @module
 */

import { join } from "node:path";
import { createReaperRegistry, reapLeftoverGroups } from "../agent/reaper.ts";
import { defaultDataDir } from "../store/open.ts";
import { prepareAgentLaunch } from "../agent/launch.ts";
import { parseFlags, reportFailure, reportUsageError } from "./args.ts";
import { parseRunConfig } from "../config.ts";
import {
  formatProbeReport,
  PROBE_OUTCOMES,
  probeAgent,
  type ProbeReport,
} from "../probe.ts";

/** Help text of `runner probe`. */
export const PROBE_HELP = `Usage: runner probe <provider> [options]

Checks whether an ACP agent is usable: the initialize handshake, then one
session/new in the workspace.

Options:
  --acp-command CMD          the agent command (required for provider=custom)
  --workspace DIR            directory for session/new (default: current)
  --env-json JSON            extra environment for the agent
  --initialize-timeout SEC   handshake deadline (default 30)
  --handshake-only           skip session/new
  --recovery                 prove cross-process session recovery (no prompt)
  --json                     print the report as JSON
  --data-dir DIR             where agent process records live (default: user data dir)

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
        "max-message-mb": { type: "string" },
        "handshake-only": { type: "boolean" },
        "data-dir": { type: "string" },
        recovery: { type: "boolean" },
        json: { type: "boolean" },
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
  let launch, config;
  try {
    config = parseRunConfig({
      provider: positionals[0],
      "acp-command": values["acp-command"],
      workspace: values.workspace ?? Deno.cwd(),
      "env-json": values["env-json"],
      "initialize-timeout": values["initialize-timeout"],
      "max-message-mb": values["max-message-mb"],
    });
    launch = prepareAgentLaunch(config);
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
    maxMessageBytes: config.maxMessageMb * 1024 * 1024,
  });
  if (values.json) {
    console.log(JSON.stringify(probeReportJson(report), null, 2));
  } else console.log(formatProbeReport(report));
  return report.exitCode;
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
    session_ok: report.sessionOk,
    recovery: report.recovery,
    error: report.error,
    stderr_tail: report.stderrTail,
  };
}
