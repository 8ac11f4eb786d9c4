/**
 * What `/acp` tells a client of the agent behind it: a handshake-only probe
 * (`initialize`, no session) of the target the conversation would run, once
 * per command, sandbox and location while the server lives (a registry
 * agent installed first, as for a run). A target on
 * another machine (remote-ssh, daemon) is not probed from here: its client
 * is told nothing was learned (`capabilities_from: "runner"`).
 *
 * @module
 */

import { prepareAgentCommand, type RegistryLaunch } from "../../providers.ts";
import type { ReaperRegistry } from "../../agent/reaper.ts";
import type { RunConfig } from "../../config.ts";
import { probeAgent } from "../../probe.ts";
import type {
  TargetDescriber,
  TargetDescription,
} from "../../server/acp/target.ts";

/** Options of {@linkcode createTargetDescriber}. */
export interface TargetDescriberOptions {
  /** Records the probed agents' process groups for the reaper. */
  registry?: ReaperRegistry;
  /** The environment agents start with (default: the runner's). */
  environment?: Record<string, string>;
  /** Resolves (and installs, once) a registry agent the config names, as its runs do; unset: presets and `custom` only. */
  resolveRegistry?(config: RunConfig): Promise<RegistryLaunch | undefined>;
}

/** Probes each local target once (a failed probe is tried again next time). */
export function createTargetDescriber(
  options: TargetDescriberOptions = {},
): TargetDescriber {
  const learned = new Map<string, Promise<TargetDescription>>();
  return async (config: RunConfig) => {
    if (config.location !== "local") return { source: "runner" };
    let command;
    try {
      command = prepareAgentCommand(config, {
        environment: options.environment,
        registry: await options.resolveRegistry?.(config),
      });
    } catch (error) {
      return {
        source: "runner",
        error: error instanceof Error ? error.message : String(error),
      };
    }
    const key = JSON.stringify([
      command.commandText,
      config.sandbox,
      config.sandboxNetwork,
      config.workspace,
    ]);
    const known = learned.get(key);
    if (known) return known;
    const probing = probe(config, command, options.registry);
    learned.set(key, probing);
    probing.then((found) => {
      if (found.source !== "probe") learned.delete(key);
    });
    return probing;
  };
}

async function probe(
  config: RunConfig,
  launch: ReturnType<typeof prepareAgentCommand>,
  registry: ReaperRegistry | undefined,
): Promise<TargetDescription> {
  const report = await probeAgent({
    launch,
    registry,
    initializeTimeoutMs: config.initializeTimeout * 1000,
    handshakeOnly: true,
    maxMessageBytes: config.maxMessageMb * 1024 * 1024,
    authMethod: config.authMethod,
  });
  if (report.outcome !== "ok" || !report.capabilities) {
    return {
      source: "runner",
      error: report.error?.message ?? `probe outcome ${report.outcome}`,
    };
  }
  return {
    source: "probe",
    protocolVersion: typeof report.protocolVersion === "number"
      ? report.protocolVersion
      : undefined,
    agentCapabilities: report.capabilities,
    authMethods: report.authMethods,
    agentInfo: report.agentInfo as TargetDescription["agentInfo"],
  };
}
