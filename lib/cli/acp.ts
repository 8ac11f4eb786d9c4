/**
 * `runner acp --url https://host/acp --token T [key=value …]`: a stdio ACP
 * agent for clients that only spawn agents (Zed's custom agents, acpx,
 * JetBrains) that bridges every message, unchanged, to a runner's `/acp`
 * over the SDK's Streamable HTTP (default) or WebSocket client. The
 * positional `key=value` pairs are run-config keys of the target, sent as
 * the URL query (the runner holds them to its operator's floor). See
 * `docs/acp-endpoint.md`. Without `--url` it fronts a local agent itself
 * (`acp_local.ts`).
 *
 * @module
 */

import { parseArgs } from "node:util";
import * as acp from "@agentclientprotocol/sdk";

/** `runner acp --help`. */
export const ACP_HELP =
  `Usage: runner acp --url URL [--token T] [options] [key=value …]
       runner acp [runner serve's run-default and policy flags]

A stdio ACP agent. With --url it bridges to a runner's /acp endpoint; without
it, it fronts a local agent itself (no server): the flags are runner serve's
(--provider, --workspace, --sandbox, --permission-decision, --data-dir, …),
every prompt is a run recorded in the data directory.

Options:
  --url URL            the runner's /acp (https://host/acp)
  --token T            its API token (default: $RUNNER_API_TOKEN)
  --transport T        http (Streamable HTTP, default) or websocket
  key=value            run-config keys of the target (provider=claude,
                       mode=plan, …), within what the runner's operator allows
`;

/** Whether an argument only means something to the bridge (`--url` mode). */
function isBridgeOnly(arg: string): boolean {
  return arg === "--token" || arg.startsWith("--token=") ||
    arg === "--transport" || arg.startsWith("--transport=") ||
    /^[a-z][a-z0-9_-]*=/i.test(arg);
}

/** Deno's WebSocket with the header argument the SDK's client passes. */
class HeaderWebSocket extends WebSocket {
  constructor(
    url: string,
    protocols?: string | string[],
    options?: { headers?: Record<string, string> },
  ) {
    // @ts-ignore: Deno's WebSocket takes `{protocols, headers}`.
    super(url, { protocols, headers: options?.headers });
  }
}

/** Runs `runner acp`; returns the exit code. */
export async function acpCommand(args: string[]): Promise<number> {
  if (!args.some((arg) => arg === "--url" || arg.startsWith("--url="))) {
    if (args.includes("--help") || args.includes("-h")) {
      console.log(ACP_HELP);
      return 0;
    }
    if (!args.some(isBridgeOnly)) {
      const { acpLocalCommand } = await import("./acp_local.ts");
      return await acpLocalCommand(args);
    }
  }
  let values, positionals;
  try {
    ({ values, positionals } = parseArgs({
      args,
      allowPositionals: true,
      options: {
        url: { type: "string" },
        token: { type: "string" },
        transport: { type: "string", default: "http" },
        help: { type: "boolean", short: "h" },
      },
    }));
  } catch (error) {
    console.error(`runner acp: ${(error as Error).message}\n\n${ACP_HELP}`);
    return 2;
  }
  if (values.help) {
    console.log(ACP_HELP);
    return 0;
  }
  if (!values.url) {
    console.error(
      "runner acp: --url is required with key=value pairs, --token or --transport; without --url, runner acp takes runner serve's run-default and policy flags (see runner acp --help).",
    );
    return 2;
  }
  if (values.transport !== "http" && values.transport !== "websocket") {
    console.error("runner acp: --transport must be http or websocket.");
    return 2;
  }
  const url = new URL(values.url);
  for (const pair of positionals) {
    const at = pair.indexOf("=");
    if (at <= 0) {
      console.error(
        `runner acp: "${pair}" is not key=value (a run-config key of the target).`,
      );
      return 2;
    }
    url.searchParams.set(pair.slice(0, at), pair.slice(at + 1));
  }
  const token = values.token ?? Deno.env.get("RUNNER_API_TOKEN");
  const headers: Record<string, string> = token
    ? { authorization: `Bearer ${token}` }
    : {};
  const { createHttpStream } = await import(
    "@agentclientprotocol/sdk/experimental/http-client"
  );
  const { createWebSocketStream } = await import(
    "@agentclientprotocol/sdk/experimental/ws-client"
  );
  const remote = values.transport === "http"
    ? createHttpStream(url.href, { headers })
    : createWebSocketStream(url.href.replace(/^http/, "ws"), {
      headers,
      WebSocket: HeaderWebSocket,
    });
  const local = acp.ndJsonStream(
    Deno.stdout.writable as WritableStream<Uint8Array>,
    Deno.stdin.readable,
  );
  // Both directions unchanged; either side ending ends the bridge.
  await Promise.race([
    local.readable.pipeTo(remote.writable).catch(() => {}),
    remote.readable.pipeTo(local.writable).catch(() => {}),
  ]);
  return 0;
}
