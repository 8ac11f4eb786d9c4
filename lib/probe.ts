/**
 * `runner probe`: is this agent usable, and what does it support? Readiness
 * is the `initialize` handshake plus one `session/new` (many agents only
 * refuse at `session/new`); `--recovery` proves cross-process session
 * recovery without sending a prompt. See `docs/readiness.md`.
 *
 * @module
 */

import type { InitializeResponse } from "@agentclientprotocol/sdk";
import { type AgentConnection, connectAgent } from "./acp/client.ts";
import type { AgentLaunch } from "./agent/launch.ts";
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
} as const;

/** One probe outcome name. */
export type ProbeOutcome = keyof typeof PROBE_OUTCOMES;

/** What a probe found. */
export interface ProbeReport {
  /** The outcome. */
  outcome: ProbeOutcome;
  /** The process exit code for the outcome. */
  exitCode: number;
  /** The command probed. */
  command: string;
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
  /** With `--recovery`: "resume", "load", or undefined when it failed. */
  recovery?: "resume" | "load";
  /** The failure, when the outcome is not ok. */
  error?: { code: string; message: string };
  /** The agent's stderr tail on failure. */
  stderrTail?: string;
}

/** Options for {@linkcode probeAgent}. */
export interface ProbeOptions {
  /** What to start. */
  launch: AgentLaunch;
  /** `initialize` deadline in ms. */
  initializeTimeoutMs: number;
  /** Skip `session/new`. */
  handshakeOnly?: boolean;
  /** Prove cross-process recovery. */
  recovery?: boolean;
  /** Largest inbound message. */
  maxMessageBytes?: number;
  /** Records agent groups so a SIGKILLed probe's agents are reaped later. */
  registry?: ReaperRegistry;
}

interface Started {
  transport: AgentTransport;
  connection: AgentConnection;
  init: InitializeResponse;
}

async function start(options: ProbeOptions): Promise<Started> {
  const transport = await launchLocal({
    launch: options.launch,
    registry: options.registry,
  });
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
    return { transport, connection, init };
  } catch (error) {
    (error as { stderrTail?: string }).stderrTail = transport.stderrTail();
    connection.close();
    await transport.teardown();
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
  };
  let started: Started | undefined;
  try {
    started = await start(options);
    report.agentInfo = started.init.agentInfo ?? null;
    report.protocolVersion = started.init.protocolVersion;
    report.capabilities = started.init.agentCapabilities ?? {};
    report.authMethods = started.init.authMethods ?? [];
    if (options.handshakeOnly && !options.recovery) return finish(report);
    const sessionId = await started.connection.newSession({
      cwd: options.launch.cwd,
      mcpServers: [],
    });
    report.sessionOk = true;
    if (!options.recovery) return finish(report);
    await stop(started);
    started = await start(options);
    report.recovery = await recover(started, sessionId, options.launch.cwd);
    return finish(report);
  } catch (error) {
    return fail(report, error, started);
  } finally {
    if (started) await stop(started);
  }
}

async function recover(
  started: Started,
  sessionId: string,
  cwd: string,
): Promise<"resume" | "load"> {
  const caps = started.init.agentCapabilities ?? {};
  const params = { sessionId, cwd, mcpServers: [] };
  if (!caps.sessionCapabilities?.resume && !caps.loadSession) {
    throw new RunnerError(
      "acp.session_missing",
      "The agent advertises neither session/resume nor loadSession: it cannot recover sessions across processes. Use it with reuse-session=false.",
    );
  }
  let resumeFailure: unknown;
  if (caps.sessionCapabilities?.resume) {
    try {
      await started.connection.resumeSession(params);
      return "resume";
    } catch (error) {
      if (!caps.loadSession) resumeFailure = error;
    }
  }
  try {
    if (resumeFailure) throw resumeFailure;
    await started.connection.loadSession(params);
    return "load";
  } catch (error) {
    const failure = toRunnerError(error);
    throw new RunnerError(
      "acp.session_missing",
      `The agent advertises ${
        [
          caps.sessionCapabilities?.resume ? "session/resume" : "",
          caps.loadSession ? "loadSession" : "",
        ].filter(Boolean).join(" and ")
      } but could not restore a session created by another process (${failure.message}). Use it with reuse-session=false.`,
    );
  }
}

function finish(report: ProbeReport): ProbeReport {
  report.exitCode = PROBE_OUTCOMES[report.outcome];
  return report;
}

function fail(
  report: ProbeReport,
  error: unknown,
  started: Started | undefined,
): ProbeReport {
  const failure = toRunnerError(error);
  const outcomes: Record<string, ProbeOutcome> = {
    "acp.missing_binary": "missing_binary",
    "acp.spawn_error": "spawn_error",
    "config.invalid": "spawn_error",
    "acp.initialize_timeout": "handshake_timeout",
    "acp.incompatible_protocol": "incompatible_protocol",
    "acp.unauthenticated": "unauthenticated",
  };
  report.outcome = outcomes[failure.code] ??
    (report.sessionOk ? "recovery_failed" : "session_error");
  report.error = { code: failure.code, message: failure.message };
  const tail = started?.transport.stderrTail() ??
    (error as { stderrTail?: string }).stderrTail;
  if (tail?.trim()) report.stderrTail = tail.slice(-4096);
  return finish(report);
}

/** Human-readable probe report. */
export function formatProbeReport(report: ProbeReport): string {
  const lines = [`outcome: ${report.outcome}`, `command: ${report.command}`];
  if (report.agentInfo !== undefined) {
    lines.push(`agent: ${JSON.stringify(report.agentInfo)}`);
    lines.push(`protocol version: ${report.protocolVersion}`);
    const caps = report.capabilities ?? {};
    lines.push(`loadSession: ${Boolean(caps.loadSession)}`);
    lines.push(
      `sessionCapabilities: ${
        Object.keys(caps.sessionCapabilities ?? {}).filter((key) =>
          key !== "_meta"
        ).join(", ") || "none"
      }`,
    );
    lines.push(
      `promptCapabilities: ${JSON.stringify(caps.promptCapabilities ?? {})}`,
    );
    lines.push(
      `mcpCapabilities: ${JSON.stringify(caps.mcpCapabilities ?? {})}`,
    );
    lines.push(
      `authMethods: ${
        (report.authMethods ?? []).map((method) => method.name ?? method.id)
          .join(", ") || "none"
      }`,
    );
  }
  if (report.sessionOk) lines.push("session/new: ok");
  if (report.recovery) lines.push(`recovery: ${report.recovery}`);
  if (report.error) {
    lines.push(`error [${report.error.code}]: ${report.error.message}`);
    if (report.outcome === "unauthenticated" && report.authMethods?.length) {
      lines.push(
        `the agent lists these auth methods: ${
          report.authMethods.map((m) => `${m.id} (${m.name})`).join(", ")
        }`,
      );
    }
  }
  if (report.stderrTail) lines.push("stderr (tail):", report.stderrTail);
  return lines.join("\n");
}
