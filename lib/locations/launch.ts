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
  const { runId, request, launch, assets, registry, secrets, keepable } =
    options;
  let release: (() => void) | undefined;
  let keep: (() => KeptRunAssets) | undefined;
  return {
    release: () => release?.(),
    keepAssets: () => keep?.(),
    async launch(signal) {
      const accept = (prepared: PreparedRunAssets | undefined) => {
        release = prepared?.release;
        keep = prepared?.keep;
        secrets.push(...(prepared?.secrets ?? []));
      };
      if (request.config.location !== "remote-ssh") {
        // The agent boots while the run's assets endpoint starts: the
        // endpoint is only needed for session/new.
        const preparing = assets?.prepare({ runId, request, keepable });
        preparing?.catch(() => {});
        const transport = await launchLocal({ launch, registry }).catch(
          (error) => {
            preparing?.then((prepared) => prepared?.release(), () => {});
            throw error;
          },
        );
        let prepared: PreparedRunAssets | undefined;
        try {
          prepared = await preparing;
          accept(prepared);
          if (signal.aborted) throw signal.reason;
        } catch (error) {
          release?.();
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
      const prepared = await assets?.prepare({ runId, request, keepable });
      accept(prepared);
      if (signal.aborted) {
        release?.();
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
    },
  };
}

function supportsTransport(server: McpServer, caps: McpCapabilities): boolean {
  if (!("type" in server)) return true;
  if (server.type === "http") return caps.http === true;
  if (server.type === "sse") return caps.sse === true;
  return true;
}
