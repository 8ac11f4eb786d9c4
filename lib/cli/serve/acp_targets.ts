/**
 * What `/acp` tells a client of the agent behind it: a handshake-only probe
 * (`initialize`, no session) of the target the conversation would run, once
 * per command, sandbox and location while the server lives; on this machine
 * (a registry agent installed first, as for a run) or, for remote-ssh, on
 * the SSH target over ssh. A daemon's agent, and a registry agent anywhere
 * but here, are not probed from here: the client is told nothing was
 * learned (`capabilities_from: "runner"`) and why (`capabilities_note`).
 *
 * @module
 */

import { prepareAgentCommand, type RegistryLaunch } from "../../providers.ts";
import { isRegistryId } from "../../agent/registry/catalogue.ts";
import { PROVIDER_PRESETS } from "../../agent/presets.ts";
import { launchSsh } from "../../locations/ssh.ts";
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
    const unprobed = notProbed(config, options.resolveRegistry !== undefined);
    if (unprobed) return { source: "runner", note: unprobed };
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
      config.location,
      config.sshTarget,
      config.sshPort,
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

/** Why a target is not probed from here, or undefined when it is. */
function notProbed(
  config: RunConfig,
  installsRegistryAgents: boolean,
): string | undefined {
  if (config.location === "daemon") {
    return `The agent runs on daemon ${
      config.daemonId ?? "(any)"
    }, which the hub does not ask to start it for a handshake; the prompt capabilities are those every agent takes.`;
  }
  const preset = config.provider === "custom" ||
    PROVIDER_PRESETS.some((entry) => entry.name === config.provider);
  const here = installsRegistryAgents && config.location === "local";
  if (!preset && !here && isRegistryId(config.provider)) {
    return `Registry agent ${config.provider}: resolved and installed by its first run there, not probed here; the prompt capabilities are those every agent takes.`;
  }
  return undefined;
}

async function probe(
  config: RunConfig,
  launch: ReturnType<typeof prepareAgentCommand>,
  registry: ReaperRegistry | undefined,
): Promise<TargetDescription> {
  const overSsh = config.location === "remote-ssh";
  const report = await probeAgent({
    launch,
    registry,
    ...(overSsh
      ? {
        startTransport: () => launchSsh({ command: launch, config, registry }),
      }
      : {}),
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
    probedOn: overSsh ? "ssh-target" : "local",
    protocolVersion: typeof report.protocolVersion === "number"
      ? report.protocolVersion
      : undefined,
    agentCapabilities: report.capabilities,
    authMethods: report.authMethods,
    agentInfo: report.agentInfo as TargetDescription["agentInfo"],
  };
}
