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
import type { AgentCommand } from "../agent/launch.ts";
import { buildAgentEnv } from "../agent/env.ts";
import type { RunConfig } from "../config.ts";
import { RunnerError } from "../errors.ts";
import { type AgentProcess, spawnAgent } from "../agent/process.ts";
import type { ReaperRegistry } from "../agent/reaper.ts";
import type { AgentTransport } from "../run/types.ts";
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
  withoutReports,
} from "./remote_report.ts";

/** How long teardown waits for the remote group report of a fresh connection. */
const PGID_WAIT_MS = 3000;

/** Options for {@linkcode launchSsh}. */
export interface SshAgentOptions {
  /** The agent command and env-json (env is rebuilt on the remote side). */
  command: AgentCommand;
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
  /**
   * Picks the remote listen port of each `ssh -R` forward (default: random in
   * 20000–59999). A forward the remote refuses (its port taken) is tried
   * again with another pick, up to {@linkcode FORWARD_ATTEMPTS} launches in all.
   */
  remotePort?: () => number;
  /** Aborts a launch still waiting for the remote wrapper (cancel, startup timeout). */
  signal?: AbortSignal;
}

/**
 * How many ssh launches a run tries while the remote refuses a `-R` forward
 * (a taken port gets another; a server that forbids forwarding refuses all).
 */
export const FORWARD_ATTEMPTS = 5;

/** What ssh prints (with ExitOnForwardFailure) when the remote refuses a forward. */
const FORWARD_FAILED = /remote port forwarding failed for listen port (\d+)/;

/** The ssh argv common to the agent connection and the teardown connection. */
export function sshBaseArgs(config: SshAgentOptions["config"]): string[] {
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
 * input before the empty line that ends env-json: exit), exec agent (a
 * preset's own executable when the remote PATH has it, else its fallback).
 */
export function remoteScript(
  workspace: string,
  launch: Pick<AgentCommand, "argv" | "choices">,
): string {
  const dir = workspace === "~"
    ? '"$HOME"'
    : workspace.startsWith("~/")
    ? `"$HOME"/${quoteWord(workspace.slice(2))}`
    : quoteWord(workspace);
  return [
    `mkdir -p -- ${dir} && cd -- ${dir} || exit 126`,
    `echo "${REMOTE_PGID_MARKER} $(ps -o pgid= -p $$ | tr -d ' ')" >&2`,
    'while IFS= read -r __runner_env || exit 125; [ -n "$__runner_env" ]; do export "$(printf %s "$__runner_env" | base64 -d)"; done',
    execLine(launch),
  ].join("\n");
}

function execLine({ argv, choices }: Pick<AgentCommand, "argv" | "choices">) {
  if (!choices) return `exec ${quoteCommand(argv)}`;
  const program = quoteWord(choices.executable[0]);
  return `if command -v -- ${program} >/dev/null 2>&1; then exec ${
    quoteCommand(choices.executable)
  }; else exec ${quoteCommand(choices.fallback)}; fi`;
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
  config: SshAgentOptions["config"],
  launch: Pick<AgentCommand, "argv" | "choices">,
): string {
  const workspace = config.workspace ?? ".";
  if (config.remoteShell !== "powershell") {
    return `bash -lc ${quoteWord(remoteScript(workspace, launch))}`;
  }
  for (const argv of commandsOf(launch)) checkPowerShellArgv(argv);
  return powerShellCommandLine(powerShellWrapper(workspace, launch));
}

function commandsOf(
  { argv, choices }: Pick<AgentCommand, "argv" | "choices">,
): string[][] {
  return choices ? [choices.executable, choices.fallback] : [argv];
}

/** Rewrites loopback MCP URLs to forwarded remote ports; returns the `-R` args. */
function forwardMcpServers(
  servers: McpServer[],
  pickPort: () => number,
): Forwards {
  const args: string[] = [];
  const rewritten = servers.map((server) => {
    if (!("url" in server)) return server;
    const url = new URL(server.url);
    if (url.hostname !== "127.0.0.1" && url.hostname !== "localhost") {
      return server;
    }
    const remotePort = pickPort();
    args.push("-R", `127.0.0.1:${remotePort}:127.0.0.1:${url.port}`);
    url.hostname = "127.0.0.1";
    url.port = String(remotePort);
    return { ...server, url: url.toString() };
  });
  if (args.length) args.push("-o", "ExitOnForwardFailure=yes");
  return { servers: rewritten, args };
}

/** The `-R` arguments of one ssh launch and the MCP servers as the remote reaches them. */
interface Forwards {
  servers: McpServer[];
  args: string[];
}

/**
 * Starts the agent on the SSH target. A `-R` forward the remote refuses is
 * tried again with new ports, up to {@linkcode FORWARD_ATTEMPTS} launches;
 * when every one is refused the run fails with `assets.tunnel_refused`.
 */
export async function launchSsh(
  options: SshAgentOptions,
): Promise<AgentTransport> {
  const { config, command } = options;
  if (!config.sshTarget) {
    throw new RunnerError(
      "config.invalid",
      "ssh-target: is required when location=remote-ssh",
    );
  }
  const remoteCommand = remoteCommandLine(config, command);
  for (let attempt = 1;; attempt++) {
    if (options.signal?.aborted) throw options.signal.reason;
    const forwards = forwardMcpServers(
      options.mcpServers ?? [],
      options.remotePort ?? randomRemotePort,
    );
    const remote = spawnSsh(options, { remoteCommand, forwards });
    const refusedPort = await startRemote(options, remote);
    if (refusedPort === undefined) {
      return transportOf(options, remote, forwards);
    }
    if (attempt === FORWARD_ATTEMPTS) {
      throw tunnelRefused(config.sshTarget, { port: refusedPort, attempt });
    }
  }
}

/** Spawns ssh with the remote wrapper and the forwards' `-R` arguments. */
function spawnSsh(
  options: SshAgentOptions,
  { remoteCommand, forwards }: { remoteCommand: string; forwards: Forwards },
): RemoteAgent {
  const argv = [
    "ssh",
    ...sshBaseArgs(options.config),
    ...forwards.args,
    "--",
    options.config.sshTarget!,
    remoteCommand,
  ];
  const report = watchRemoteReport();
  const agent = spawnAgent({
    argv,
    cwd: Deno.cwd(),
    env: buildAgentEnv({ presetNames: ["SSH_AUTH_SOCK"] }),
    secrets: options.command.secrets,
    registry: options.registry,
    onStderr: report.onStderr,
  });
  return { agent, report };
}

function transportOf(
  options: SshAgentOptions,
  remote: RemoteAgent,
  forwards: Forwards,
): AgentTransport {
  let tornDown: Promise<void> | undefined;
  const teardown = () => tornDown ??= teardownRemote(options, remote);
  return {
    stdin: remote.agent.stdin,
    stdout: remote.agent.stdout,
    exited: remote.agent.exited,
    stderrTail: () => withoutReports(remote.agent.stderrTail()),
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
 * group: ssh settles its `-R` forwards before any session output arrives, so
 * a refused forward ends ssh first and the wrapper exits on end-of-input
 * without starting the agent; then the refused remote port is returned, for
 * another try. A PowerShell wrapper reads env-json through a buffered reader,
 * so nothing more is written until it reports it has read it. Any other
 * early exit is left to the engine, which reports it with ssh's stderr; an
 * abort ends what was started and throws its reason.
 */
async function startRemote(
  options: SshAgentOptions,
  remote: RemoteAgent,
): Promise<number | undefined> {
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
    if (config.remoteShell !== "powershell") return undefined;
    const ready = await awaitReport(report.ready, agent, signal);
    if (ready !== "aborted") return undefined;
    // The wrapper's process id is known: stop its tree, not just ssh.
    await teardownRemote(options, remote).catch(() => {});
    throw signal!.reason;
  }
  // ssh is gone (or must go): this also waits until its stderr is read.
  await agent.terminate({ graceMs: 1000 });
  if (reported === "aborted") throw signal!.reason;
  const refused = agent.stderrTail().match(FORWARD_FAILED);
  return refused ? Number(refused[1]) : undefined;
}

function tunnelRefused(
  target: string,
  { port, attempt }: { port: number; attempt: number },
): RunnerError {
  return new RunnerError(
    "assets.tunnel_refused",
    `The SSH server on ${target} refused the reverse tunnel (ssh -R) that brings this run's LangBot assets to the agent, ${attempt} times with different remote ports (last ${port}): its policy forbids forwarding (AllowTcpForwarding/PermitListen) or those ports were taken. Set mcp-bridge-transport=http with mcp-public-url (a URL of this runner's MCP bridge that ${target} can reach; see docs/config.md), or set langbot-assets-enabled=false.`,
    { detail: { remote_port: port, attempts: attempt } },
  );
}

/** Kills the remote process group, then the local ssh process. */
async function teardownRemote(
  options: SshAgentOptions,
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
  options: SshAgentOptions,
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
