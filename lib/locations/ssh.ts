/**
 * The remote-ssh location: the agent runs on another machine, started over
 * `ssh` with ACP on the ssh channel's stdio. Environment variables do not
 * cross ssh, so env-json travels as base64 lines on stdin ahead of the ACP
 * stream (never on a command line); the remote wrapper (bash, or PowerShell
 * on Windows) reports its process group (or process id) so teardown can kill
 * the whole remote group (or tree) over a second ssh connection. See
 * `docs/teardown.md` and `docs/transport.md`.
 *
 * @module
 */

import type { McpServer } from "@agentclientprotocol/sdk";
import type { AgentLaunch } from "../agent/launch.ts";
import { buildAgentEnv } from "../agent/env.ts";
import type { RunConfig } from "../config.ts";
import { RunnerError } from "../errors.ts";
import { type AgentProcess, spawnAgent } from "../agent/process.ts";
import type { ReaperRegistry } from "../agent/reaper.ts";
import type { AgentTransport } from "../run/engine.ts";
import { quoteCommand, quoteWord } from "../agent/shell_words.ts";
import { settleWithin } from "../timing.ts";
import {
  checkPowerShellArgv,
  powerShellCommandLine,
  powerShellKillScript,
  powerShellWrapper,
} from "./powershell.ts";
import {
  awaitReport,
  REMOTE_PGID_MARKER,
  type RemoteReport,
  watchRemoteReport,
} from "./remote_report.ts";

/** How long teardown waits for the remote group report of a fresh connection. */
const PGID_WAIT_MS = 3000;

/** Options for {@linkcode launchSsh}. */
export interface SshLaunchOptions {
  /** The agent command and env-json (env is rebuilt on the remote side). */
  launch: AgentLaunch;
  /** `ssh-*` keys and `workspace`. */
  config: Pick<
    RunConfig,
    | "sshTarget"
    | "sshPort"
    | "sshIdentityFile"
    | "sshConnectTimeout"
    | "sshExtraOptions"
    | "workspace"
    | "envJson"
    | "remoteShell"
  >;
  /** Local MCP servers to reach from the remote through `ssh -R`. */
  mcpServers?: McpServer[];
  /** Records the local ssh process group for the reaper. */
  registry?: ReaperRegistry;
  /** SIGTERM→SIGKILL grace for the remote group, in ms. */
  killGraceMs?: number;
  /** Aborts a launch still waiting for the remote wrapper (cancel, startup timeout). */
  signal?: AbortSignal;
}

/** The ssh argv common to the agent connection and the teardown connection. */
export function sshBaseArgs(config: SshLaunchOptions["config"]): string[] {
  const args = [
    "-T",
    "-p",
    String(config.sshPort),
    "-o",
    "BatchMode=yes",
    "-o",
    `ConnectTimeout=${Math.ceil(config.sshConnectTimeout)}`,
    "-o",
    "ServerAliveInterval=15",
  ];
  if (config.sshIdentityFile) args.push("-i", config.sshIdentityFile);
  for (const option of config.sshExtraOptions) {
    args.push(
      ...(option.startsWith("-") ? option.split(/\s+/) : ["-o", option]),
    );
  }
  return args;
}

/**
 * The remote bash script: workspace, report pgid, env from stdin (end of
 * input before the empty line that ends env-json: exit), exec agent.
 */
export function remoteScript(workspace: string, argv: string[]): string {
  const dir = workspace === "~"
    ? '"$HOME"'
    : workspace.startsWith("~/")
    ? `"$HOME"/${quoteWord(workspace.slice(2))}`
    : quoteWord(workspace);
  return [
    `mkdir -p -- ${dir} && cd -- ${dir} || exit 126`,
    `echo "${REMOTE_PGID_MARKER} $(ps -o pgid= -p $$ | tr -d ' ')" >&2`,
    'while IFS= read -r __runner_env || exit 125; [ -n "$__runner_env" ]; do export "$(printf %s "$__runner_env" | base64 -d)"; done',
    `exec ${quoteCommand(argv)}`,
  ].join("\n");
}

function encodeEnvLines(env: Record<string, string>): Uint8Array {
  const lines = Object.entries(env).map(([name, value]) =>
    btoa(String.fromCharCode(...new TextEncoder().encode(`${name}=${value}`)))
  );
  return new TextEncoder().encode([...lines, ""].join("\n") + "\n");
}

function randomRemotePort(): number {
  return 20000 + Math.floor(Math.random() * 40000);
}

/** The command ssh runs on the remote: the bash or the PowerShell wrapper. */
function remoteCommandLine(
  config: SshLaunchOptions["config"],
  argv: string[],
): string {
  const workspace = config.workspace ?? ".";
  if (config.remoteShell !== "powershell") {
    return `bash -lc ${quoteWord(remoteScript(workspace, argv))}`;
  }
  checkPowerShellArgv(argv);
  return powerShellCommandLine(powerShellWrapper(workspace, argv));
}

/** Rewrites loopback MCP URLs to forwarded remote ports; returns the `-R` args. */
function forwardMcpServers(
  servers: McpServer[],
): { servers: McpServer[]; args: string[] } {
  const args: string[] = [];
  const rewritten = servers.map((server) => {
    if (!("url" in server)) return server;
    const url = new URL(server.url);
    if (url.hostname !== "127.0.0.1" && url.hostname !== "localhost") {
      return server;
    }
    const remotePort = randomRemotePort();
    args.push("-R", `127.0.0.1:${remotePort}:127.0.0.1:${url.port}`);
    url.hostname = "127.0.0.1";
    url.port = String(remotePort);
    return { ...server, url: url.toString() };
  });
  if (args.length) args.push("-o", "ExitOnForwardFailure=yes");
  return { servers: rewritten, args };
}

/** Starts the agent on the SSH target. */
export async function launchSsh(
  options: SshLaunchOptions,
): Promise<AgentTransport> {
  const { config, launch } = options;
  if (!config.sshTarget) {
    throw new RunnerError(
      "config.invalid",
      "ssh-target: is required when location=remote-ssh",
    );
  }
  const remoteCommand = remoteCommandLine(config, launch.argv);
  const forwards = forwardMcpServers(options.mcpServers ?? []);
  const localEnv = buildAgentEnv({ presetNames: ["SSH_AUTH_SOCK"] });
  const argv = [
    "ssh",
    ...sshBaseArgs(config),
    ...forwards.args,
    "--",
    config.sshTarget,
    remoteCommand,
  ];
  const report = watchRemoteReport();
  const agent = spawnAgent({
    argv,
    cwd: Deno.cwd(),
    env: localEnv,
    secrets: launch.secrets,
    registry: options.registry,
    onStderr: report.onStderr,
  });
  await startRemote(options, { agent, report });
  let tornDown: Promise<void> | undefined;
  const teardown = () =>
    tornDown ??= teardownRemote(options, { agent, report });
  return {
    stdin: agent.stdin,
    stdout: agent.stdout,
    exited: agent.exited,
    stderrTail: agent.stderrTail,
    teardown,
    mcpServers: forwards.servers.length ? forwards.servers : undefined,
  };
}

/** The ssh connection of a launched remote agent. */
interface RemoteAgent {
  /** The local ssh process. */
  agent: AgentProcess;
  /** Where the remote process group is reported. */
  report: RemoteReport;
}

/**
 * Hands env-json to the remote wrapper once it has reported its process
 * group: ssh settles a `-R` tunnel before any session output arrives, so a
 * refused tunnel ends ssh first and the wrapper exits on end-of-input
 * without starting the agent. A PowerShell wrapper reads env-json through a
 * buffered reader, so nothing more is written until it reports it has read
 * it. A refused tunnel is `assets.tunnel_refused`; any other early exit is
 * left to the engine, which reports it with ssh's stderr.
 */
async function startRemote(
  options: SshLaunchOptions,
  remote: RemoteAgent,
): Promise<void> {
  const { agent, report } = remote;
  const { config, signal } = options;
  const reported = await awaitReport(report.known, agent, signal);
  if (reported === "reported") {
    const envWriter = agent.stdin.getWriter();
    try {
      await envWriter.write(encodeEnvLines(config.envJson));
    } catch {
      // ssh already exited; the run fails on the closed stream with its stderr.
    } finally {
      envWriter.releaseLock();
    }
    if (config.remoteShell !== "powershell") return;
    const ready = await awaitReport(report.ready, agent, signal);
    if (ready === "reported") return;
    if (ready === "exited") return;
    await agent.terminate({ graceMs: 1000 });
    throw signal!.reason;
  }
  // ssh is gone (or must go): this also waits until its stderr is read.
  await agent.terminate({ graceMs: 1000 });
  if (reported === "aborted") throw signal!.reason;
  const refused = agent.stderrTail().match(
    /remote port forwarding failed for listen port (\d+)/,
  );
  if (refused) throw tunnelRefused(config.sshTarget!, refused[1]);
}

function tunnelRefused(target: string, port: string): RunnerError {
  return new RunnerError(
    "assets.tunnel_refused",
    `The SSH server on ${target} refused the reverse tunnel (ssh -R, remote port ${port}) that brings this run's LangBot assets to the agent: its policy forbids forwarding (AllowTcpForwarding/PermitListen) or that port was taken. Set mcp-bridge-transport=http with mcp-public-url (a URL of this runner's MCP bridge that ${target} can reach; see docs/config.md), or set langbot-assets-enabled=false.`,
    { detail: { remote_port: Number(port) } },
  );
}

/** Kills the remote process group, then the local ssh process. */
async function teardownRemote(
  options: SshLaunchOptions,
  remote: RemoteAgent,
): Promise<void> {
  const { agent, report } = remote;
  // The wrapper reports its group before the agent runs; if teardown
  // comes first and ssh is still up, give the report a moment to arrive.
  if (report.pgid() === undefined) {
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      report.known,
      agent.exited,
      new Promise((resolve) => timer = setTimeout(resolve, PGID_WAIT_MS)),
    ]);
    clearTimeout(timer);
  }
  let sshGone = false;
  await settleWithin(agent.exited.then(() => sshGone = true), 0);
  try {
    const remotePgid = report.pgid();
    if (remotePgid) await killRemoteGroup(options, remotePgid);
    else if (!sshGone) {
      throw new RunnerError(
        "acp.process_exited",
        `The remote agent on ${options.config.sshTarget} never reported its process group, so its teardown cannot be confirmed. Check that machine for leftover agent processes.`,
      );
    }
  } finally {
    await agent.terminate({ graceMs: 1000 });
  }
}

/** Kills the remote process group over a second ssh connection and confirms it is gone. */
async function killRemoteGroup(
  options: SshLaunchOptions,
  pgid: number,
): Promise<void> {
  const result = await new Deno.Command("ssh", {
    args: [
      ...sshBaseArgs(options.config),
      "--",
      options.config.sshTarget!,
      options.config.remoteShell === "powershell"
        ? powerShellCommandLine(powerShellKillScript(pgid))
        : `sh -c ${quoteWord(posixKillScript(pgid, options.killGraceMs))}`,
    ],
    env: buildAgentEnv({ presetNames: ["SSH_AUTH_SOCK"] }),
    clearEnv: true,
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).output().catch(() => undefined);
  if (!result?.success) {
    throw new RunnerError(
      "acp.process_exited",
      `Could not confirm that the remote agent's process group ${pgid} on ${options.config.sshTarget} is gone. Check that machine for leftover agent processes.`,
    );
  }
}

/** SIGTERM to the remote group, SIGKILL after the grace; exits 0 once it is gone. */
function posixKillScript(pgid: number, killGraceMs = 2000): string {
  const grace = Math.max(1, Math.ceil(killGraceMs / 100));
  return [
    `kill -TERM -${pgid} 2>/dev/null || exit 0`,
    `i=0; while [ $i -lt ${grace} ]; do kill -0 -${pgid} 2>/dev/null || exit 0; sleep 0.1; i=$((i+1)); done`,
    `kill -KILL -${pgid} 2>/dev/null`,
    `i=0; while [ $i -lt 50 ]; do kill -0 -${pgid} 2>/dev/null || exit 0; sleep 0.1; i=$((i+1)); done`,
    "exit 1",
  ].join("\n");
}
