/**
 * The daemon's jobs: each `run.start` becomes a local run of the engine
 * (`launchLocal`), with a per-job MCP proxy that forwards the agent's MCP
 * requests to the hub. A job reports `cleanupConfirmed` only once every
 * process group it started is verified gone. See `docs/daemon.md`.
 *
 * @module
 */

import { failedBeforeStartEvent } from "../run/failure.ts";
import { prepareAgentLaunch } from "../agent/launch.ts";
import type { DaemonJob, DaemonJobResult } from "./client.ts";
import { mapRunStart } from "../relay/payload.ts";
import { RunnerError, toRunnerError } from "../errors.ts";
import { isTerminalEvent } from "../events.ts";
import { launchLocal } from "../locations/local.ts";
import { type McpProxy, startMcpProxy } from "../mcp_proxy.ts";
import { killGroup } from "../agent/process_group.ts";
import { processGroupMembers } from "../agent/process_table.ts";
import type { ReaperRegistry } from "../agent/reaper.ts";
import type { JsonObject } from "../relay.ts";
import {
  type AgentTransport,
  type RunHandle,
  startRun,
} from "../run/engine.ts";

/** Options of {@linkcode createDaemonJobRunner}. */
export interface DaemonJobRunnerOptions {
  /** Records agent groups so a restarted daemon reaps what a crash left. */
  registry?: ReaperRegistry;
  /** The daemon's environment (defaults to `Deno.env.toObject()`). */
  environment?: Record<string, string>;
  /** Where agents start when a payload names no directory (default: cwd). */
  fallbackCwd?: string;
  /** SIGTERM→SIGKILL grace at teardown, in ms (default 2000). */
  killGraceMs?: number;
  /** Structured log (never secrets). */
  log?: (entry: Record<string, unknown>) => void;
}

/** Runs the hub's jobs on this machine. */
export interface DaemonJobRunner {
  /** The `runJob` for `runDaemonClient`. */
  runJob(job: DaemonJob): Promise<DaemonJobResult>;
  /**
   * Ends every job with `reason` (their `run.failed` reaches the hub) and
   * refuses new ones; resolves when all have cleaned up.
   */
  cancelAll(reason: RunnerError): Promise<void>;
  /** Jobs in flight. */
  readonly active: number;
}

/** Makes the daemon's job runner. */
export function createDaemonJobRunner(
  options: DaemonJobRunnerOptions = {},
): DaemonJobRunner {
  const log = options.log ?? (() => {});
  const environment = options.environment ?? Deno.env.toObject();
  const killGraceMs = options.killGraceMs ?? 2000;
  const jobs = new Map<string, { handle: RunHandle; ended: Promise<void> }>();
  let stopping: RunnerError | undefined;

  async function runJob(job: DaemonJob): Promise<DaemonJobResult> {
    if (stopping) {
      emitFailure(job, stopping);
      return { cleanupConfirmed: true };
    }
    let plan, launch;
    try {
      plan = mapRunStart(job.payload, {
        jobId: job.jobId,
        fallbackCwd: options.fallbackCwd ?? Deno.cwd(),
        home: environment.HOME ?? environment.USERPROFILE,
      });
      launch = prepareAgentLaunch(plan.config, { environment });
    } catch (error) {
      log({ msg: "job refused", job_id: job.jobId, code: codeOf(error) });
      emitFailure(job, error);
      return { cleanupConfirmed: true };
    }
    const secrets = launch.secrets;
    const jobLog = (entry: Record<string, unknown>) =>
      log({ job_id: job.jobId, run_id: plan.runId, ...entry });
    if (plan.ignoredKeys.length) {
      jobLog({ msg: "ignored run.start config keys", keys: plan.ignoredKeys });
    }
    const groups = new Set<number>();
    const registry: ReaperRegistry = {
      register(pgid) {
        groups.add(pgid);
        return options.registry?.register(pgid) ?? { release() {} };
      },
    };
    let proxy: McpProxy | undefined;
    if (plan.assetsEnabled) {
      proxy = startMcpProxy({
        forward: job.mcp,
        timeoutMs: plan.mcpRequestTimeoutMs,
      });
    }
    jobLog({
      msg: "job started",
      provider: plan.config.provider,
      cwd: launch.cwd,
      mcp_proxy: proxy?.url,
    });
    let launched: Promise<AgentTransport> | undefined;
    const handle = startRun({
      runId: plan.runId,
      input: plan.input,
      config: plan.config,
      storedSessionId: plan.storedSessionId,
      sessionCwd: plan.sessionCwd,
      mcpServers: plan.mcpServers,
      secrets,
      log: jobLog,
      emit(event) {
        // After run.cancel the client sends its own daemon_cancelled failure.
        if (isTerminalEvent(event) && job.signal.aborted) return;
        job.emit(event as unknown as JsonObject);
      },
      launch: () => {
        launched = launchLocal({ launch, registry, killGraceMs }).then((
          transport,
        ) => ({
          ...transport,
          mcpServers: proxy ? [proxy.serverEntry] : undefined,
        }));
        return launched;
      },
    });
    const onAbort = () =>
      handle.cancel(
        new RunnerError("run.cancelled", "The hub cancelled the run."),
      );
    job.signal.addEventListener("abort", onAbort, { once: true });
    if (job.signal.aborted) onAbort();
    const ended = Promise.withResolvers<void>();
    jobs.set(job.jobId, { handle, ended: ended.promise });
    try {
      const result = await handle.done;
      // A launch that finished after a cancel was never handed to the engine.
      await (await launched?.catch(() => undefined))?.teardown();
      const confirmed = await confirmGroupsGone(groups, {
        killGraceMs,
        registry: options.registry,
        log: jobLog,
      });
      jobLog({
        msg: "job ended",
        status: result.status,
        code: result.code,
        cleanup_confirmed: confirmed,
      });
      return { cleanupConfirmed: confirmed };
    } finally {
      job.signal.removeEventListener("abort", onAbort);
      await proxy?.close();
      jobs.delete(job.jobId);
      ended.resolve();
    }
  }

  /** Reports a job that never started (the message holds no env values). */
  function emitFailure(job: DaemonJob, error: unknown) {
    const runId = job.payload.run_id;
    const { run_id: _, ...event } = failedBeforeStartEvent(undefined, error);
    job.emit(
      (typeof runId === "string"
        ? { run_id: runId, ...event }
        : event) as unknown as JsonObject,
    );
  }

  return {
    runJob,
    async cancelAll(reason) {
      stopping ??= reason;
      const running = [...jobs.values()];
      for (const job of running) job.handle.cancel(reason);
      await Promise.all(running.map((job) => job.ended));
    },
    get active() {
      return jobs.size;
    },
  };
}

function codeOf(error: unknown): string {
  return toRunnerError(error).code;
}

/**
 * Verifies that no member of any group is alive, killing stragglers once
 * more (e.g. an agent spawned while its launch was being cancelled). A group
 * that survives is recorded again for the reaper.
 */
async function confirmGroupsGone(
  groups: Set<number>,
  options: {
    killGraceMs: number;
    registry?: ReaperRegistry;
    log: (entry: Record<string, unknown>) => void;
  },
): Promise<boolean> {
  let confirmed = true;
  for (const pgid of groups) {
    if (!(await processGroupMembers(pgid)).length) continue;
    options.log({ msg: "agent group still alive after teardown", pgid });
    await killGroup(pgid, undefined, options.killGraceMs);
    const left = await processGroupMembers(pgid);
    if (left.length) {
      options.log({ msg: "agent group survived SIGKILL", pgid, pids: left });
      options.registry?.register(pgid);
      confirmed = false;
    }
  }
  return confirmed;
}
