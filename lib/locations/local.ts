/**
 * The local location: the agent runs on this machine, in a process group of
 * its own. Like every location it only supplies the agent's byte streams and
 * a teardown; the run engine does the rest.
 *
 * @module
 */

import type { AgentLaunch } from "../agent/launch.ts";
import { RunnerError } from "../errors.ts";
import { spawnAgent } from "../agent/process.ts";
import type { ReaperRegistry } from "../agent/reaper.ts";
import type { AgentTransport } from "../run/engine.ts";

/** Options for {@linkcode launchLocal}. */
export interface LocalLaunchOptions {
  /** What to start. */
  launch: AgentLaunch;
  /** Records the agent's group for the reaper. */
  registry?: ReaperRegistry;
  /** SIGTERM→SIGKILL grace at teardown, in ms. */
  killGraceMs?: number;
}

/** Starts the agent on this machine, creating the workspace if needed. */
export async function launchLocal(
  options: LocalLaunchOptions,
): Promise<AgentTransport> {
  const { launch } = options;
  try {
    await Deno.mkdir(launch.cwd, { recursive: true });
  } catch (error) {
    throw new RunnerError(
      "config.invalid",
      `workspace: cannot create ${launch.cwd} (${
        error instanceof Error ? error.message : String(error)
      }). Choose a writable directory.`,
    );
  }
  const agent = spawnAgent({
    argv: launch.argv,
    cwd: launch.cwd,
    env: launch.env,
    secrets: launch.secrets,
    registry: options.registry,
    sandbox: launch.sandbox,
  });
  return {
    stdin: agent.stdin,
    stdout: agent.stdout,
    exited: agent.exited,
    stderrTail: agent.stderrTail,
    teardown: () => agent.terminate({ graceMs: options.killGraceMs ?? 2000 }),
  };
}
