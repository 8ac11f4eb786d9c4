/**
 * The agent's head start in `runner run`: a local run's agent is spawned as
 * soon as the invocation is checked, before the run machinery (store, assets,
 * engine, the ACP SDK) loads, so the agent boots while the runner loads. The
 * run manager later launches the same command through the local location,
 * which takes this agent instead of starting another one; an agent nobody
 * took (the run was refused, or its command came out different) is torn
 * down. See `docs/performance.md`, "Start-up".
 *
 * @module
 */

import { type AgentCommand } from "../../agent/launch.ts";
import { prepareAgentCommand } from "../../providers.ts";
import {
  createReaperRegistry,
  type ReaperRegistry,
} from "../../agent/reaper.ts";
import type { RunConfig } from "../../config.ts";
import { prepareLocalWorkspace, spawnLocal } from "../../locations/local.ts";
import type { AgentTransport } from "../../run/types.ts";

/** An agent started ahead of its run. */
export interface HeadStart {
  /** The registry the agent's group is recorded in (the run manager's too). */
  registry: ReaperRegistry;
  /**
   * The agent, for the launch of `command` when it is the command the agent
   * was started with; undefined otherwise (then the agent is torn down).
   * Hands the agent out once.
   */
  take(command: AgentCommand): Promise<AgentTransport> | undefined;
  /** Tears the agent down unless a run took it; resolves once it is gone. */
  discard(): Promise<void>;
}

/** Options for {@linkcode startAgentAhead}. */
export interface HeadStartOptions {
  /** The run's validated config. */
  config: RunConfig;
  /** The reaper's directory (`<data-dir>/agents`). */
  agentsDir: string;
  /** SIGTERM→SIGKILL grace at teardown, in ms (default 2000). */
  killGraceMs?: number;
}

/**
 * Starts the agent of a local run now; undefined when the run is not a
 * plain local one or anything on the way fails (the run then starts its
 * agent itself, and reports the same failure as it would have).
 */
export function startAgentAhead(
  options: HeadStartOptions,
): HeadStart | undefined {
  const { config } = options;
  if (config.location !== "local") return undefined;
  let command: AgentCommand;
  let registry: ReaperRegistry;
  let launched: Promise<AgentTransport> | undefined;
  try {
    command = prepareAgentCommand(config);
    prepareLocalWorkspace(command.cwd);
    registry = createReaperRegistry(options.agentsDir);
    launched = Promise.resolve(spawnLocal({
      command,
      registry,
      killGraceMs: options.killGraceMs,
      deferNetwork: true,
    }));
  } catch {
    return undefined;
  }
  let tornDown: Promise<void> | undefined;
  const discard = () => {
    if (launched) {
      tornDown = launched.then((transport) => transport.teardown(), () => {});
      launched = undefined;
    }
    return tornDown ?? Promise.resolve();
  };
  return {
    registry,
    take(wanted) {
      if (!launched) return undefined;
      if (!sameCommand(command, wanted)) {
        void discard();
        return undefined;
      }
      const agent = launched;
      launched = undefined;
      return agent;
    },
    discard,
  };
}

/** Whether two prepared commands start the same process the same way. */
function sameCommand(a: AgentCommand, b: AgentCommand): boolean {
  return a.cwd === b.cwd &&
    JSON.stringify(a.argv) === JSON.stringify(b.argv) &&
    JSON.stringify(Object.entries(a.env).sort()) ===
      JSON.stringify(Object.entries(b.env).sort()) &&
    JSON.stringify(a.sandbox ?? null) === JSON.stringify(b.sandbox ?? null);
}
