/**
 * The `runner` command line: dispatches to subcommands, each imported lazily.
 *
 * @module
 */

import { RUNNER_VERSION } from "./lib/version.ts";

const HELP =
  `runner ${RUNNER_VERSION} — run ACP coding agents for a control plane

Usage: runner <command> [options]

Commands:
  serve                  run the HTTP service (runs API, n8n webhook, daemon hub)
  daemon --daemon-id ID  run jobs from a hub on this machine (dials out)
  daemons list|unfence   show fenced/connected daemons, lift a fence
  conversations list|show|export|import
                         read, export and import stored conversations
  probe <provider>       check that an agent is usable and what it supports
  run <provider> PROMPT  run one prompt locally and stream the answer
  acp --url URL          a stdio ACP agent bridged to a runner's /acp (for editors)
  providers              list the provider presets (--registry: the ACP
                         registry's agents this machine can run)
  agents                 list, install or remove ACP registry agents
  token                  print a fresh random token for --daemon-token

Options: --help (on every command), --version
`;

type Command = (args: string[]) => Promise<number>;

const COMMANDS: Record<string, () => Promise<Command>> = {
  run: async () => (await import("./lib/cli/run/command.ts")).runCommand,
  probe: async () => (await import("./lib/cli/probe.ts")).probeCommand,
  providers: async () =>
    (await import("./lib/cli/providers.ts")).providersCommand,
  serve: async () => (await import("./lib/cli/serve/command.ts")).serveCommand,
  daemon: async () => (await import("./daemon.ts")).daemonCommand,
  daemons: async () => (await import("./lib/cli/daemons.ts")).daemonsCommand,
  conversations: async () =>
    (await import("./lib/cli/conversations.ts")).conversationsCommand,
  "mcp-stdio": async () =>
    (await import("./lib/assets/stdio_bridge.ts")).mcpStdioCommand,
  agents: async () => (await import("./lib/cli/agents.ts")).agentsCommand,
  token: async () => (await import("./lib/cli/providers.ts")).tokenCommand,
  acp: async () => (await import("./lib/cli/acp.ts")).acpCommand,
};

/** Runs the CLI with `args`; returns the process exit code. */
export async function main(args: string[]): Promise<number> {
  const [name, ...rest] = args;
  if (!name || name === "--help" || name === "-h" || name === "help") {
    console.log(HELP);
    return name ? 0 : 2;
  }
  if (name === "--version" || name === "-V") {
    console.log(`runner ${RUNNER_VERSION}`);
    return 0;
  }
  const load = COMMANDS[name];
  if (!load) {
    console.error(`Unknown command "${name}".\n\n${HELP}`);
    return 2;
  }
  return await (await load())(rest);
}

if (import.meta.main) {
  Deno.exit(await main(Deno.args));
}
