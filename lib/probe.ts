/**
 * `runner probe`: is this agent usable, and what does it support? Readiness
 * is the `initialize` handshake plus one `session/new` (many agents only
 * refuse at `session/new`); `--recovery` proves cross-process session
 * recovery the way a real conversation needs it: one short prompt, a fresh
 * agent process, then `session/resume` or `session/load`. See
 * `docs/readiness.md`.
 *
 * @module
 */

import type { SessionState } from "./acp/session_state.ts";
import { authenticateAgent } from "./acp/authenticate.ts";
import type { InitializeResponse } from "@agentclientprotocol/sdk";
import { type AgentConnection, connectAgent } from "./acp/client.ts";
import type { AgentCommand } from "./agent/launch.ts";
import { RunnerError, toRunnerError } from "./errors.ts";
import { launchLocal } from "./locations/local.ts";
import type { ReaperRegistry } from "./agent/reaper.ts";
import type { AgentTransport } from "./run/engine.ts";

/** Probe outcomes, each with its own exit code. */
export const PROBE_OUTCOMES = {
  ok: 0,
  missing_binary: 127,
  spawn_error: 126,
  handshake_timeout: 124,
  incompatible_protocol: 3,
  unauthenticated: 4,
  session_error: 5,
  recovery_failed: 6,
  inconclusive: 7,
  agent_exited: 8,
  sandbox_unavailable: 9,
} as const;

/** One probe outcome name. */
export type ProbeOutcome = keyof typeof PROBE_OUTCOMES;

/** The prompt `--recovery` sends so that the agent saves the session. */
export const RECOVERY_PROMPT = "Reply with the single word OK.";

/** What a probe found. */
export interface ProbeReport {
  /** The outcome. */
  outcome: ProbeOutcome;
  /** The process exit code for the outcome. */
  exitCode: number;
  /** The command probed. */
  command: string;
  /** Where the command came from: acp-command, the agent's own executable, or the preset's pinned fallback. */
  commandSource?: AgentCommand["commandSource"];
  /** Agent name and version, when the handshake completed. */
  agentInfo?: unknown;
  /** The protocol version the agent answered. */
  protocolVersion?: unknown;
  /** The agent's capabilities. */
  capabilities?: InitializeResponse["agentCapabilities"];
  /** Auth methods the agent lists. */
  authMethods?: InitializeResponse["authMethods"];
  /** Whether `session/new` succeeded (undefined when skipped). */
  sessionOk?: boolean;
  /** What the new session advertised: config options, modes, models and the values in force. */
  sessionChoices?: SessionState;
  /** With `--recovery`: whether the session was prompted before the restart. */
  recoveryPrompted?: boolean;
  /** With `--recovery`: "resume", "load", or undefined when it failed. */
  recovery?: "resume" | "load";
  /** The failure, when the outcome is not ok. */
  error?: { code: string; message: string };
  /** The agent's stderr tail on failure. */
  stderrTail?: string;
  /** When the agent did not start or open a session: what its preset needs ({@linkcode ProbeOptions.startHint}). */
  hint?: string;
  /** Whether this machine can confine agents, and how this probe's agent ran (`docs/sandbox.md`). */
  sandbox?: ProbeSandbox;
}

/** The sandbox part of a probe report. */
export interface ProbeSandbox {
  /** bubblewrap is installed and can make the sandbox's namespaces. */
  available: boolean;
  /** Why not, when it is not. */
  reason?: string;
  /** The mode the probed agent (and a run of the same config) gets. */
  mode: "off" | "confined";
  /** The network mode under `confined`. */
  network?: "none" | "full" | "host";
}

/** Options for {@linkcode probeAgent}. */
export interface ProbeOptions {
  /** What to start. */
  launch: AgentCommand;
  /** `initialize` deadline in ms. */
  initializeTimeoutMs: number;
  /** Skip `session/new`. */
  handshakeOnly?: boolean;
  /** Prove cross-process recovery. */
  recovery?: boolean;
  /** Prompt the session once before the restart (default true; costs one small model call). */
  recoveryPrompt?: boolean;
  /** Deadline of that prompt in ms (default 120 s). */
  promptTimeoutMs?: number;
  /** `auth-method`: call `authenticate` with it after `initialize`. */
  authMethod?: string;
  /** Largest inbound message. */
  maxMessageBytes?: number;
  /** Records agent groups so a SIGKILLed probe's agents are reaped later. */
  registry?: ReaperRegistry;
  /** Said when the agent does not start (missing, unstartable, exits, never answers `initialize`, or fails `session/new`): a preset's requirements. */
  startHint?: string;
  /** Starts the agent somewhere else than here (default: on this machine, as `launch` says). */
  startTransport?: () => Promise<AgentTransport>;
}

interface Started {
  transport: AgentTransport;
  connection: AgentConnection;
  init: InitializeResponse;
}

/** A recovery check whose result says nothing about real conversations. */
class Inconclusive extends Error {
  constructor(readonly failure: RunnerError) {
    super(failure.message);
  }
}

async function start(options: ProbeOptions): Promise<Started> {
  const transport = options.startTransport
    ? await options.startTransport()
    : await launchLocal({
      command: options.launch,
      registry: options.registry,
    });
  try {
    await transport.openNetwork?.([]);
  } catch (error) {
    await transport.teardown();
    throw error;
  }
  const connection = connectAgent({
    stdin: transport.stdin,
    stdout: transport.stdout,
    maxMessageBytes: options.maxMessageBytes ?? 64 * 1024 * 1024,
    onUpdate: () => {},
    onPermission: () =>
      Promise.resolve({ outcome: { outcome: "cancelled" as const } }),
  });
  try {
    const init = await connection.initialize(options.initializeTimeoutMs);
    await authenticateAgent({
      connection,
      initialize: init,
      method: options.authMethod,
    });
    return { transport, connection, init };
  } catch (error) {
    connection.close();
    // After teardown stderr is drained: the tail holds the agent's last words.
    await transport.teardown();
    (error as { stderrTail?: string }).stderrTail = transport.stderrTail();
    throw error;
  }
}

async function stop(started: Started) {
  started.connection.close();
  await started.transport.teardown();
}

/** Probes an agent; never throws. */
export async function probeAgent(options: ProbeOptions): Promise<ProbeReport> {
  const report: ProbeReport = {
    outcome: "ok",
    exitCode: 0,
    command: options.launch.commandText,
    commandSource: options.launch.commandSource,
  };
  let started: Started | undefined;
  try {
    started = await start(options);
    report.agentInfo = started.init.agentInfo ?? null;
    report.protocolVersion = started.init.protocolVersion;
    report.capabilities = started.init.agentCapabilities ?? {};
    report.authMethods = started.init.authMethods ?? [];
    if (options.handshakeOnly && !options.recovery) return finish(report);
    const { sessionId, state } = await started.connection.newSession({
      cwd: options.launch.cwd,
      mcpServers: [],
    });
    report.sessionOk = true;
    report.sessionChoices = state;
    if (!options.recovery) return finish(report);
    report.recoveryPrompted = options.recoveryPrompt !== false;
    if (report.recoveryPrompted) {
      await promptOnce(started.connection, sessionId, options);
    }
    await stop(started);
    started = await start(options);
    report.recovery = await recover(started, {
      sessionId,
      cwd: options.launch.cwd,
      prompted: report.recoveryPrompted,
    });
    return finish(report);
  } catch (error) {
    // Stopped first, so the stderr tail holds everything the agent wrote.
    if (started) await stop(started);
    return fail(report, error, started, options.startHint);
  } finally {
    if (started) await stop(started);
  }
}

/** Sends {@linkcode RECOVERY_PROMPT}; a failure makes the check inconclusive. */
async function promptOnce(
  connection: AgentConnection,
  sessionId: string,
  options: ProbeOptions,
): Promise<void> {
  const timeoutMs = options.promptTimeoutMs ?? 120_000;
  try {
    await connection.prompt(
      { sessionId, prompt: [{ type: "text", text: RECOVERY_PROMPT }] },
      AbortSignal.timeout(timeoutMs),
    );
  } catch (error) {
    const failure = toRunnerError(error);
    if (!["acp.prompt_failed", "run.cancelled"].includes(failure.code)) {
      throw failure;
    }
    throw new Inconclusive(
      new RunnerError(
        failure.code,
        `The recovery check's prompt ${
          failure.code === "run.cancelled"
            ? `got no answer within ${timeoutMs / 1000} s`
            : `failed (${failure.message})`
        }, so recovery was not tested. Check the agent's model access (its stderr may say more) and raise --prompt-timeout, or use --no-prompt.`,
        { detail: failure.detail },
      ),
    );
  }
}

interface RecoverTarget {
  sessionId: string;
  cwd: string;
  /** Whether the session was prompted before the restart. */
  prompted: boolean;
}

async function recover(
  started: Started,
  { sessionId, cwd, prompted }: RecoverTarget,
): Promise<"resume" | "load"> {
  const caps = started.init.agentCapabilities ?? {};
  const params = { sessionId, cwd, mcpServers: [] };
  const attempts: Array<["resume" | "load", () => Promise<unknown>]> = [];
  if (caps.sessionCapabilities?.resume) {
    attempts.push(["resume", () => started.connection.resumeSession(params)]);
  }
  if (caps.loadSession) {
    attempts.push(["load", () => started.connection.loadSession(params)]);
  }
  if (!attempts.length) {
    throw new RunnerError(
      "acp.session_missing",
      "The agent advertises neither session/resume nor loadSession: it cannot recover sessions across processes. Use it with reuse-session=false.",
    );
  }
  const answers: string[] = [];
  for (const [method, attempt] of attempts) {
    try {
      await attempt();
      return method;
    } catch (error) {
      const failure = toRunnerError(error);
      if (failure.code !== "acp.session_failed") throw failure;
      answers.push(failure.message);
    }
  }
  const advertised = attempts.map(([method]) =>
    method === "resume" ? "session/resume" : "loadSession"
  ).join(" and ");
  if (!prompted) {
    throw new Inconclusive(
      new RunnerError(
        "acp.session_failed",
        `The agent could not restore a session that was never prompted (${
          answers.join("; ")
        }). Many agents save a session only once it has been prompted, so this says nothing about real conversations: run probe --recovery without --no-prompt (one short prompt).`,
      ),
    );
  }
  throw new RunnerError(
    "acp.session_missing",
    `The agent advertises ${advertised} but could not restore a prompted session created by another process (${
      answers.join("; ")
    }). Use it with reuse-session=false.`,
  );
}

function finish(report: ProbeReport): ProbeReport {
  report.exitCode = PROBE_OUTCOMES[report.outcome];
  return report;
}

const OUTCOME_BY_CODE: Record<string, ProbeOutcome> = {
  "acp.missing_binary": "missing_binary",
  "acp.spawn_error": "spawn_error",
  "config.invalid": "spawn_error",
  "acp.initialize_timeout": "handshake_timeout",
  "acp.incompatible_protocol": "incompatible_protocol",
  "acp.unauthenticated": "unauthenticated",
  "acp.process_exited": "agent_exited",
  "sandbox.unavailable": "sandbox_unavailable",
};

/**
 * The outcomes where the agent did not start or could not open a session (an
 * adapter such as pi-acp answers `initialize` itself and only fails at
 * `session/new` when the program it drives is missing).
 */
const START_FAILURES: readonly ProbeOutcome[] = [
  "missing_binary",
  "spawn_error",
  "handshake_timeout",
  "agent_exited",
  "session_error",
];

function fail(
  report: ProbeReport,
  error: unknown,
  started: Started | undefined,
  startHint: string | undefined,
): ProbeReport {
  const inconclusive = error instanceof Inconclusive;
  const failure = inconclusive ? error.failure : toRunnerError(error);
  report.outcome = inconclusive
    ? "inconclusive"
    : OUTCOME_BY_CODE[failure.code] ??
      (report.sessionOk ? "recovery_failed" : "session_error");
  report.error = { code: failure.code, message: failure.message };
  const tail = started?.transport.stderrTail() ??
    (error as { stderrTail?: string }).stderrTail;
  if (tail?.trim()) report.stderrTail = tail.slice(-4096);
  if (startHint && START_FAILURES.includes(report.outcome)) {
    report.hint = startHint;
  }
  return finish(report);
}
