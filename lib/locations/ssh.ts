/**
 * The remote-ssh location: the agent runs on another machine, started over
 * `ssh` with ACP on the ssh channel's stdio. Environment variables do not
 * cross ssh, so env-json travels as base64 lines on stdin ahead of the ACP
 * stream (never on a command line); the remote shell reports its process
 * group so teardown can kill the whole remote group over a second ssh
 * connection. See `docs/teardown.md` and `docs/transport.md`.
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

/** How long teardown waits for the remote group report of a fresh connection. */
const PGID_WAIT_MS = 3000;

/** The marker line the remote wrapper prints on stderr. */
export const REMOTE_PGID_MARKER = "__RUNNER_REMOTE_PGID__";

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
  >;
  /** Local MCP servers to reach from the remote through `ssh -R`. */
  mcpServers?: McpServer[];
  /** Records the local ssh process group for the reaper. */
  registry?: ReaperRegistry;
  /** SIGTERM→SIGKILL grace for the remote group, in ms. */
  killGraceMs?: number;
  /**
   * Picks the remote listen port of each `ssh -R` forward (default: random in
   * 20000–59999). A port that is taken on the remote is replaced by another
   * pick, up to {@linkcode FORWARD_ATTEMPTS} launches in all.
   */
  remotePort?: () => number;
  /**
   * Ends the wait for the remote side (a cancel or the startup timeout): the
   * launch then returns what it started, for the caller to tear down.
   */
  signal?: AbortSignal;
}

/** How many ssh launches a run tries when a remote forward's port is taken. */
export const FORWARD_ATTEMPTS = 5;

/** What ssh prints (with ExitOnForwardFailure) when a remote port is taken. */
const FORWARD_FAILED = /remote port forwarding failed for listen port/;

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
 * The remote bash script: workspace, env from stdin, report pgid, exec agent
 * (a preset's own executable when the remote PATH has it, else its fallback).
 */
export function remoteScript(
  workspace: string,
  launch: Pick<AgentLaunch, "argv" | "choices">,
): string {
  const dir = workspace === "~"
    ? '"$HOME"'
    : workspace.startsWith("~/")
    ? `"$HOME"/${quoteWord(workspace.slice(2))}`
    : quoteWord(workspace);
  return [
    `mkdir -p -- ${dir} && cd -- ${dir} || exit 126`,
    'while IFS= read -r __runner_env && [ -n "$__runner_env" ]; do export "$(printf %s "$__runner_env" | base64 -d)"; done',
    `echo "${REMOTE_PGID_MARKER} $(ps -o pgid= -p $$ | tr -d ' ')" >&2`,
    execLine(launch),
  ].join("\n");
}

function execLine({ argv, choices }: Pick<AgentLaunch, "argv" | "choices">) {
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

/** Rewrites loopback MCP URLs to forwarded remote ports; returns the `-R` args. */
function forwardMcpServers(
  servers: McpServer[],
  pickPort: () => number,
): { servers: McpServer[]; args: string[] } {
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

/** Starts the agent on the SSH target. */
export async function launchSsh(
  options: SshLaunchOptions,
): Promise<AgentTransport> {
  const { config } = options;
  if (!config.sshTarget) {
    throw new RunnerError(
      "config.invalid",
      "ssh-target: is required when location=remote-ssh",
    );
  }
  let started: StartedSsh;
  for (let attempt = 1;; attempt++) {
    started = await startSsh(options);
    if (attempt === FORWARD_ATTEMPTS) break;
    if (!await forwardPortTaken(started, options.signal)) break;
  }
  const { remote, forwards } = started;
  let tornDown: Promise<void> | undefined;
  const teardown = () => tornDown ??= teardownRemote(options, remote);
  return {
    stdin: remote.agent.stdin,
    stdout: remote.agent.stdout,
    exited: remote.agent.exited,
    stderrTail: remote.agent.stderrTail,
    teardown,
    mcpServers: forwards.servers.length ? forwards.servers : undefined,
  };
}

/** One ssh launch: the connection and the forwards it asked for. */
interface StartedSsh {
  remote: RemoteAgent;
  forwards: { servers: McpServer[]; args: string[] };
}

/** Spawns ssh with the remote wrapper and writes env-json on its stdin. */
async function startSsh(options: SshLaunchOptions): Promise<StartedSsh> {
  const { config, launch } = options;
  const workspace = config.workspace ?? ".";
  const forwards = forwardMcpServers(
    options.mcpServers ?? [],
    options.remotePort ?? randomRemotePort,
  );
  const argv = [
    "ssh",
    ...sshBaseArgs(config),
    ...forwards.args,
    "--",
    config.sshTarget!,
    `bash -lc ${quoteWord(remoteScript(workspace, launch))}`,
  ];
  const report = watchRemotePgid();
  const agent = spawnAgent({
    argv,
    cwd: Deno.cwd(),
    env: buildAgentEnv({ presetNames: ["SSH_AUTH_SOCK"] }),
    secrets: launch.secrets,
    registry: options.registry,
    onStderr: report.onStderr,
  });
  const envWriter = agent.stdin.getWriter();
  try {
    await envWriter.write(encodeEnvLines(config.envJson));
  } catch {
    // ssh already exited; the run fails on the closed stream with its stderr.
  } finally {
    envWriter.releaseLock();
  }
  return { remote: { agent, report }, forwards };
}

/**
 * With remote forwards, waits until the remote wrapper reports in (the
 * forwards are up: sshd answers them before it opens the session), ssh
 * exits, or `signal` aborts; true, after cleaning up, when ssh exited because
 * a remote port was taken, so the launch can be tried again with other ports.
 */
async function forwardPortTaken(
  { remote, forwards }: StartedSsh,
  signal?: AbortSignal,
): Promise<boolean> {
  if (!forwards.args.length || signal?.aborted) return false;
  const exitedFirst = await Promise.race([
    remote.report.known.then(() => false),
    remote.agent.exited.then(() => true),
    new Promise<boolean>((resolve) =>
      signal?.addEventListener("abort", () => resolve(false), { once: true })
    ),
  ]);
  if (!exitedFirst) return false;
  await remote.agent.stderrEnded;
  if (!FORWARD_FAILED.test(remote.agent.stderrTail())) return false;
  await remote.agent.terminate({ graceMs: 1000 });
  return true;
}

/** The remote wrapper's process-group report, read from ssh's stderr. */
interface RemotePgidReport {
  /** Takes ssh's stderr (for `spawnAgent`'s `onStderr`). */
  onStderr(text: string): void;
  /** The remote process group, once reported. */
  pgid(): number | undefined;
  /** Resolves when the remote process group was reported. */
  known: Promise<void>;
}

function watchRemotePgid(): RemotePgidReport {
  let seen = "";
  let remotePgid: number | undefined;
  const pgidKnown = Promise.withResolvers<void>();
  const marker = new RegExp(`${REMOTE_PGID_MARKER} (\\d+)`);
  return {
    onStderr(text) {
      if (remotePgid !== undefined) return;
      seen = (seen + text).slice(-4096);
      const match = seen.match(marker);
      if (match) {
        remotePgid = Number(match[1]);
        pgidKnown.resolve();
      }
    },
    pgid: () => remotePgid,
    known: pgidKnown.promise,
  };
}

/** The ssh connection of a launched remote agent. */
interface RemoteAgent {
  /** The local ssh process. */
  agent: AgentProcess;
  /** Where the remote process group is reported. */
  report: RemotePgidReport;
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
  const grace = Math.max(1, Math.ceil((options.killGraceMs ?? 2000) / 100));
  const script = [
    `kill -TERM -${pgid} 2>/dev/null || exit 0`,
    `i=0; while [ $i -lt ${grace} ]; do kill -0 -${pgid} 2>/dev/null || exit 0; sleep 0.1; i=$((i+1)); done`,
    `kill -KILL -${pgid} 2>/dev/null`,
    `i=0; while [ $i -lt 50 ]; do kill -0 -${pgid} 2>/dev/null || exit 0; sleep 0.1; i=$((i+1)); done`,
    "exit 1",
  ].join("\n");
  const result = await new Deno.Command("ssh", {
    args: [
      ...sshBaseArgs(options.config),
      "--",
      options.config.sshTarget!,
      `sh -c ${quoteWord(script)}`,
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
