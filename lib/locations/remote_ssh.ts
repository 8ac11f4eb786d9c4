/**
 * The remote-ssh location: the agent runs on the SSH target (`ssh.ts`). It
 * starts once the run's assets are ready, because its tunnels need them;
 * tunnelled MCP servers are offered by the agent's capabilities.
 *
 * @module
 */

import type { McpCapabilities, McpServer } from "@agentclientprotocol/sdk";
import type {
  AgentLocation,
  AgentStart,
  StartedAgent,
} from "../run/location.ts";
import { launchSsh } from "./ssh.ts";

/** Makes the remote-ssh location. */
export function createSshLocation(): AgentLocation {
  return { prepare() {}, start: startOverSsh };
}

async function startOverSsh(context: AgentStart): Promise<StartedAgent> {
  const { runId, request, keepable, signal } = context;
  const prepared = await context.assets?.prepare({ runId, request, keepable });
  const release = () => prepared?.release();
  if (signal.aborted) {
    release();
    throw signal.reason;
  }
  const transport = await launchSsh({
    command: context.command,
    config: request.config,
    mcpServers: prepared?.mcpServers,
    registry: context.registry,
    signal,
  }).catch((error) => {
    release();
    throw error;
  });
  // The tunnelled servers are offered like any other: http/sse only
  // when the agent advertises them (with mcp-bridge-transport=http
  // nothing is tunnelled: the assets entry comes from the session list).
  const forwarded = transport.mcpServers ?? [];
  return {
    transport: {
      ...transport,
      mcpServers: undefined,
      promptPrefix: prepared?.promptPrefix,
      sessionMcpServers: (caps) => [
        ...forwarded.filter((server) => supportsTransport(server, caps)),
        ...(prepared?.sessionMcpServers?.(caps) ?? []),
      ],
    },
    secrets: prepared?.secrets ?? [],
    release,
    keepAssets: () => prepared?.keep?.(),
  };
}

function supportsTransport(server: McpServer, caps: McpCapabilities): boolean {
  if (!("type" in server)) return true;
  if (server.type === "http") return caps.http === true;
  if (server.type === "sse") return caps.sse === true;
  return true;
}
