/**
 * The local location: the agent runs on this machine, in a process group of
 * its own. It starts the agent first, so the agent boots while the run's
 * assets endpoint starts (`session/new` is the first to need it); the run
 * engine does the rest.
 *
 * @module
 */

import type { AgentCommand } from "../agent/launch.ts";
import { RunnerError } from "../errors.ts";
import { spawnAgent } from "../agent/process.ts";
import { loopbackPorts } from "../agent/sandbox_network.ts";
import type { ReaperRegistry } from "../agent/reaper.ts";
import type {
  AgentLocation,
  AgentStart,
  StartedAgent,
} from "../run/location.ts";
import type { AgentTransport } from "../run/types.ts";

/** Options for {@linkcode launchLocal}. */
export interface LocalAgentOptions {
  /** What to start. */
  command: AgentCommand;
  /** Records the agent's group for the reaper. */
  registry?: ReaperRegistry;
  /** SIGTERM→SIGKILL grace at teardown, in ms. */
  killGraceMs?: number;
  /**
   * A confined agent with a private network waits for the transport's
   * `openNetwork` (the run's endpoints are known then) instead of getting a
   * network without them at once.
   */
  deferNetwork?: boolean;
}

/** Starts the agent on this machine, creating the workspace if needed. */
export async function launchLocal(
  options: LocalAgentOptions,
): Promise<AgentTransport> {
  const { command } = options;
  try {
    await Deno.mkdir(command.cwd, { recursive: true });
  } catch (error) {
    throw new RunnerError(
      "config.invalid",
      `workspace: cannot create ${command.cwd} (${
        error instanceof Error ? error.message : String(error)
      }). Choose a writable directory.`,
    );
  }
  return spawnLocal(options);
}

/** Starts the agent on this machine in an existing workspace, at once. */
export function spawnLocal(options: LocalAgentOptions): AgentTransport {
  const { command } = options;
  const agent = spawnAgent({
    argv: command.argv,
    cwd: command.cwd,
    env: command.env,
    secrets: command.secrets,
    registry: options.registry,
    sandbox: command.sandbox,
    ownPidNamespace: !command.sandbox,
    deferNetwork: options.deferNetwork,
  });
  return {
    stdin: agent.stdin,
    stdout: agent.stdout,
    exited: agent.exited,
    stderrTail: agent.stderrTail,
    teardown: () => agent.terminate({ graceMs: options.killGraceMs ?? 2000 }),
    openNetwork: agent.openNetwork,
  };
}

/** Creates the workspace of a local run up front, so a bad one fails before anything starts. */
export function prepareLocalWorkspace(cwd: string): void {
  try {
    Deno.mkdirSync(cwd, { recursive: true });
  } catch (error) {
    throw new RunnerError(
      "config.invalid",
      `workspace: cannot create ${cwd} (${
        error instanceof Deno.errors.NotCapable ||
          error instanceof Deno.errors.PermissionDenied
          ? "permission denied"
          : error instanceof Error
          ? error.message
          : String(error)
      }). Choose a writable directory.`,
    );
  }
}

/** Options of {@linkcode createLocalLocation}. */
export interface LocalLocationOptions {
  /** SIGTERM→SIGKILL grace at teardown, in ms (default 2000). */
  killGraceMs?: number;
  /**
   * An agent already started for the run (`runner run`'s head start): the
   * launch takes it when it runs `command`, and starts one otherwise.
   */
  startedAhead?: (command: AgentCommand) => Promise<AgentTransport> | undefined;
}

/** Makes the local location. */
export function createLocalLocation(
  options: LocalLocationOptions = {},
): AgentLocation {
  return {
    prepare: (command) => prepareLocalWorkspace(command.cwd),
    start: (context) => startHere(context, options),
  };
}

/**
 * Starts the agent, then waits for the run's assets; if the endpoint fails,
 * the agent is torn down.
 */
async function startHere(
  context: AgentStart,
  options: LocalLocationOptions,
): Promise<StartedAgent> {
  const { runId, request, keepable, signal } = context;
  const preparing = context.assets?.prepare({ runId, request, keepable });
  preparing?.catch(() => {});
  const release = () => preparing?.then((p) => p.release(), () => {});
  const transport = await (options.startedAhead?.(context.command) ??
    launchLocal({
      command: context.command,
      registry: context.registry,
      killGraceMs: options.killGraceMs,
      deferNetwork: true,
    })).catch((error) => {
      release();
      throw error;
    });
  let prepared: Awaited<typeof preparing>;
  try {
    prepared = await preparing;
    if (signal.aborted) throw signal.reason;
    await transport.openNetwork?.(loopbackPorts(prepared?.endpointUrls ?? []));
    if (signal.aborted) throw signal.reason;
  } catch (error) {
    prepared?.release();
    await transport.teardown();
    throw error;
  }
  return {
    transport: {
      ...transport,
      mcpServers: prepared?.mcpServers,
      sessionMcpServers: prepared?.sessionMcpServers,
      promptPrefix: prepared?.promptPrefix,
    },
    secrets: prepared?.secrets ?? [],
    release: () => prepared?.release(),
    keepAssets: () => prepared?.keep?.(),
  };
}
