/**
 * The engine's `launch` for runs whose agent the runner itself starts (local
 * and remote-ssh): prepares the run's assets, then starts the agent through
 * the location, and offers MCP servers by the agent's capabilities.
 *
 * @module
 */

import type { McpCapabilities, McpServer } from "@agentclientprotocol/sdk";
import type { AgentLaunch } from "../agent/launch.ts";
import { RunnerError } from "../errors.ts";
import { launchSsh } from "./ssh.ts";
import { launchLocal } from "./local.ts";
import type { ReaperRegistry } from "../agent/reaper.ts";
import type { AgentTransport } from "../run/engine.ts";
import type {
  KeptRunAssets,
  RunAssetsHook,
  RunRequest,
} from "../run/request.ts";

/** Options for {@linkcode createAgentLaunch}. */
export interface AgentLaunchOptions {
  /** The run id. */
  runId: string;
  /** The run request. */
  request: RunRequest;
  /** The agent command and environment. */
  launch: AgentLaunch;
  /** Assets wiring, if any. */
  assets?: RunAssetsHook;
  /** Records agent groups for the reaper. */
  registry?: ReaperRegistry;
  /** The run's redaction list; run tokens are added to it. */
  secrets: string[];
  /** The agent may stay warm after the run: its assets endpoint must be able to outlive it. */
  keepable?: boolean;
}

/** What a run's assets hook prepared. */
type PreparedRunAssets = Awaited<ReturnType<RunAssetsHook["prepare"]>>;

/** A launch function for the engine and the release of what it prepared. */
export interface PreparedLaunch {
  /** Starts the agent (the engine's `launch`). */
  launch(signal: AbortSignal): Promise<AgentTransport>;
  /** Releases the run's assets (idempotent). */
  release(): void;
  /** Keeps the run's assets endpoint with its warm agent (only when `keepable`). */
  keepAssets(): KeptRunAssets | undefined;
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

/** Builds the engine's launch for a local or remote-ssh run. */
export function createAgentLaunch(options: AgentLaunchOptions): PreparedLaunch {
  const { runId, request, assets, secrets, keepable } = options;
  let release: (() => void) | undefined;
  let keep: (() => KeptRunAssets) | undefined;
  const prepare = async () => {
    const prepared = await assets?.prepare({ runId, request, keepable });
    release = prepared?.release;
    keep = prepared?.keep;
    secrets.push(...(prepared?.secrets ?? []));
    return prepared;
  };
  const releaseAssets = () => release?.();
  return {
    release: releaseAssets,
    keepAssets: () => keep?.(),
    launch: (signal) => {
      const steps = { prepare, release: releaseAssets, signal };
      return request.config.location === "remote-ssh"
        ? launchOverSsh(options, steps)
        : launchHere(options, steps);
    },
  };
}

/** How a launch prepares (and releases) the run's assets, and its abort signal. */
interface LaunchSteps {
  /** Prepares the run's assets (recording their release). */
  prepare(): Promise<PreparedRunAssets | undefined>;
  /** Releases what `prepare` made. */
  release(): void;
  /** Aborts the launch. */
  signal: AbortSignal;
}

/**
 * A local agent starts first and boots while the run's assets endpoint
 * starts (`session/new` is the first to need it); if the endpoint fails, the
 * agent is torn down.
 */
async function launchHere(
  { launch, registry }: AgentLaunchOptions,
  { prepare, release, signal }: LaunchSteps,
): Promise<AgentTransport> {
  const preparing = prepare();
  preparing.catch(() => {});
  const transport = await launchLocal({ launch, registry }).catch((error) => {
    preparing.then(release, () => {});
    throw error;
  });
  let prepared: PreparedRunAssets | undefined;
  try {
    prepared = await preparing;
    if (signal.aborted) throw signal.reason;
  } catch (error) {
    release();
    await transport.teardown();
    throw error;
  }
  return {
    ...transport,
    mcpServers: prepared?.mcpServers,
    sessionMcpServers: prepared?.sessionMcpServers,
    promptPrefix: prepared?.promptPrefix,
  };
}

/** A remote-ssh agent starts once its assets are ready: its tunnels need them. */
async function launchOverSsh(
  { launch, request, registry }: AgentLaunchOptions,
  { prepare, release, signal }: LaunchSteps,
): Promise<AgentTransport> {
  const prepared = await prepare();
  if (signal.aborted) {
    release();
    throw signal.reason;
  }
  const transport = await launchSsh({
    launch,
    config: request.config,
    mcpServers: prepared?.mcpServers,
    registry,
    signal,
  });
  // The tunnelled servers are offered like any other: http/sse only
  // when the agent advertises them (with mcp-bridge-transport=http
  // nothing is tunnelled: the assets entry comes from the session list).
  const forwarded = transport.mcpServers ?? [];
  return {
    ...transport,
    mcpServers: undefined,
    promptPrefix: prepared?.promptPrefix,
    sessionMcpServers: (caps) => [
      ...forwarded.filter((server) => supportsTransport(server, caps)),
      ...(prepared?.sessionMcpServers?.(caps) ?? []),
    ],
  };
}

function supportsTransport(server: McpServer, caps: McpCapabilities): boolean {
  if (!("type" in server)) return true;
  if (server.type === "http") return caps.http === true;
  if (server.type === "sse") return caps.sse === true;
  return true;
}
