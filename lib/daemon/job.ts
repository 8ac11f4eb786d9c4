/**
 * The daemon's jobs: each `run.start` becomes a run at the local location,
 * started like the manager's runs (`run/agent_run.ts`), with a per-job MCP
 * proxy that forwards the agent's MCP requests to the hub; its events go out in the relay's spellings
 * (`relay/wire_events.ts`). A job reports `cleanupConfirmed` only once every
 * process group it started is verified gone. See `docs/daemon.md`.
 *
 * @module
 */

import {
  planRegistryProvider,
  type RegistryContext,
  type RegistryLaunch,
} from "../providers.ts";
import { installingEvents } from "../run/install_first.ts";
import {
  PERMISSION_ASK_CAPABILITY,
  SESSION_UPDATE_CAPABILITY,
} from "../relay.ts";
import type { PermissionAnswer } from "../run/permission_desk.ts";
import { failedBeforeStartEvent } from "../run/failure.ts";
import type { DaemonJob, DaemonJobResult } from "./client.ts";
import {
  type DaemonSandbox,
  type DaemonTerminals,
  mapRunStart,
} from "../relay/payload.ts";
import { runInputOf } from "../relay/input.ts";
import { toRelayEvent } from "../relay/wire_events.ts";
import { checkRunInput, emptyInputError, isEmptyInput } from "../run/prompt.ts";
import { RunnerError, toRunnerError } from "../errors.ts";
import { createEventRestorer, isTerminalEvent } from "../events.ts";
import { redactDeep, redactSecrets } from "../secrets.ts";
import { confirmGroupsGone } from "../agent/process_group.ts";
import type { ReaperRegistry } from "../agent/reaper.ts";
import type { JsonObject } from "../relay.ts";
import type { RunHandle } from "../run/engine.ts";
import { type AgentRun, startAgentRun } from "../run/agent_run.ts";
import type { RunRequest } from "../run/request.ts";
import { type RunSetup, setUpRun } from "../run/setup.ts";
import type { AgentLocation } from "../run/location.ts";
import type { WarmPool } from "../run/warm/pool.ts";
import { createLocalLocation } from "../locations/local.ts";
import {
  type DaemonFloor,
  daemonOperatorConfig,
  type FlooredJobPlan,
  floorJobPlan,
} from "./job_floor.ts";
import {
  createJobMcpAssets,
  jobKeptSession,
  type JobMcpAssets,
  jobWarmEntrance,
} from "./job_agent.ts";

/** Options of {@linkcode createDaemonJobRunner}. */
export interface DaemonJobRunnerOptions {
  /** Records agent groups so a restarted daemon reaps what a crash left. */
  registry?: ReaperRegistry;
  /** The daemon's environment (defaults to `Deno.env.toObject()`). */
  environment?: Record<string, string>;
  /** Where agents start when a payload names no directory (default: cwd). */
  fallbackCwd?: string;
  /** The daemon's own sandbox settings, which a hub cannot lower (`docs/sandbox.md`). */
  sandbox?: DaemonSandbox;
  /** The daemon's own client-terminal settings, which a hub cannot raise. */
  terminals?: DaemonTerminals;
  /** The daemon's own floor under a hub's workspace and session values (`docs/daemon.md`). */
  floor?: DaemonFloor;
  /** SIGTERM→SIGKILL grace at teardown, in ms (default 2000). */
  killGraceMs?: number;
  /** Structured log (never secrets). */
  log?: (entry: Record<string, unknown>) => void;
  /** Keeps agents warm between the jobs of a session (`docs/daemon.md`). */
  warmPool?: WarmPool;
  /** Where the jobs' agents start (default: the local location with `killGraceMs`). */
  location?: AgentLocation;
  /** Where a hub's registry agents are looked up and installed, for this machine's platform (`docs/registry.md`). */
  agentRegistry?: RegistryContext & {
    /** This daemon's `--registry-url` (a hub cannot choose it). */
    registryUrl?: string;
  };
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

/** The runner's settings and the jobs in flight. */
interface JobRunnerState {
  options: DaemonJobRunnerOptions;
  log: (entry: Record<string, unknown>) => void;
  environment: Record<string, string>;
  killGraceMs: number;
  location: AgentLocation;
  jobs: Map<string, { handle: RunHandle; ended: Promise<void> }>;
  /** The job that runs each run id now (a kept MCP proxy forwards through it). */
  jobsByRun: Map<string, DaemonJob>;
  /** Set once `cancelAll` was called: new jobs are refused with it. */
  stopping?: RunnerError;
}

/** Makes the daemon's job runner. */
export function createDaemonJobRunner(
  options: DaemonJobRunnerOptions = {},
): DaemonJobRunner {
  const runner: JobRunnerState = {
    options,
    log: options.log ?? (() => {}),
    environment: options.environment ?? Deno.env.toObject(),
    killGraceMs: options.killGraceMs ?? 2000,
    location: options.location ??
      createLocalLocation({ killGraceMs: options.killGraceMs ?? 2000 }),
    jobs: new Map(),
    jobsByRun: new Map(),
  };
  return {
    runJob: (job) => runJob(runner, job),
    async cancelAll(reason) {
      runner.stopping ??= reason;
      const running = [...runner.jobs.values()];
      for (const job of running) job.handle.cancel(reason);
      await Promise.all(running.map((job) => job.ended));
    },
    get active() {
      return runner.jobs.size;
    },
  };
}

/** Runs one hub job as a local run until its processes are gone. */
async function runJob(
  runner: JobRunnerState,
  job: DaemonJob,
): Promise<DaemonJobResult> {
  if (runner.stopping) {
    emitFailure(job, runner.stopping);
    return { cleanupConfirmed: true };
  }
  const planned = await setUpJob(runner, job);
  if (!planned) return { cleanupConfirmed: true };
  if (runner.stopping) {
    // cancelAll came while the job was being set up.
    emitFailure(job, runner.stopping, planned.sentBefore + 1);
    return { cleanupConfirmed: true };
  }
  const { plan } = planned;
  // The daemon's own logger knows only its token; the job's secrets (its
  // env-json) belong to the hub's caller, not to the daemon's operator.
  const jobLog = (entry: Record<string, unknown>) =>
    runner.log(
      redactDeep(
        { job_id: job.jobId, run_id: plan.runId, ...entry },
        planned.setup.secrets,
      ),
    );
  if (plan.ignoredKeys.length) {
    jobLog({ msg: "ignored run.start config keys", keys: plan.ignoredKeys });
  }
  const started = startJobRun(runner, { job, ...planned, log: jobLog });
  const { handle } = started;
  const onAbort = () =>
    handle.cancel(
      new RunnerError("run.cancelled", "The hub cancelled the run."),
    );
  job.signal.addEventListener("abort", onAbort, { once: true });
  if (job.signal.aborted) onAbort();
  const ended = Promise.withResolvers<void>();
  runner.jobs.set(job.jobId, { handle, ended: ended.promise });
  try {
    return await finishJob(runner, started);
  } finally {
    job.signal.removeEventListener("abort", onAbort);
    await started.assets.closed();
    if (runner.jobsByRun.get(plan.runId) === job) {
      runner.jobsByRun.delete(plan.runId);
    }
    runner.jobs.delete(job.jobId);
    ended.resolve();
  }
}

/** A job ready to start: its plan under the daemon's floor and its run's set-up. */
interface PlannedJob {
  plan: FlooredJobPlan;
  request: RunRequest;
  setup: RunSetup;
  /** Events the job sent before its run started (its agent's install): the run's are numbered on. */
  sentBefore: number;
}

/**
 * Maps the payload, holds it to the daemon's floor and sets its run up like
 * the manager's runs (`run/setup.ts`); a refused job gets its failure.
 */
async function setUpJob(
  runner: JobRunnerState,
  job: DaemonJob,
): Promise<PlannedJob | undefined> {
  let sentBefore = 0;
  try {
    const plan = planJob(runner, job);
    const report = (type: string, data: Record<string, unknown>) => {
      const wire = toRelayEvent({
        run_id: plan.runId,
        type,
        data,
        sequence: ++sentBefore,
        timestamp: Date.now(),
      });
      job.emit(
        wire.event as unknown as JsonObject,
        wire.runner as JsonObject | undefined,
      );
    };
    const sendUpdate = plan.sessionUpdates &&
        job.hubCapabilities.includes(SESSION_UPDATE_CAPABILITY)
      ? job.update
      : undefined;
    const request: RunRequest = {
      input: plan.input,
      config: plan.config,
      sessionChoices: plan.sessionChoices,
      ...(sendUpdate
        ? { onSessionUpdate: (update) => sendUpdate(update as JsonObject) }
        : {}),
    };
    const setup = await setUpRun({
      request,
      environment: runner.environment,
      location: runner.location,
      findSession: () => Promise.resolve(jobKeptSession(plan)),
      warm: jobWarmEntrance(plan, runner.options.warmPool),
      resolveRegistry: () =>
        registryAgentOf(
          plan,
          runner.options.agentRegistry,
          plan.config.streaming ? installingEvents(report) : undefined,
        ),
    });
    return { plan, request, setup, sentBefore };
  } catch (error) {
    runner.log({ msg: "job refused", job_id: job.jobId, code: codeOf(error) });
    emitFailure(job, error, sentBefore + 1);
    return undefined;
  }
}

/**
 * The job's registry agent, resolved and installed with this daemon's
 * registry: the version the hub pinned, or `agent.version_unavailable`.
 */
async function registryAgentOf(
  plan: FlooredJobPlan,
  context: DaemonJobRunnerOptions["agentRegistry"],
  onProgress?: RegistryContext["onProgress"],
): Promise<RegistryLaunch | undefined> {
  if (!context) return undefined;
  const config = {
    ...plan.config,
    registryUrl: context.registryUrl ?? plan.config.registryUrl,
  };
  const planned = await planRegistryProvider(config, context);
  if (!planned || "launch" in planned) return planned?.launch;
  return await planned.install(onProgress);
}

/**
 * The job's payload mapped and held to the daemon's floor, its input
 * checked; throws why the job is refused.
 */
function planJob(runner: JobRunnerState, job: DaemonJob): FlooredJobPlan {
  // Like daemon.py, an empty prompt is refused before anything else.
  if (isEmptyInput(runInputOf(job.payload))) throw emptyInputError();
  const { options, environment } = runner;
  const home = environment.HOME ?? environment.USERPROFILE;
  const plan = floorJobPlan({
    plan: mapRunStart(job.payload, {
      jobId: job.jobId,
      fallbackCwd: options.fallbackCwd ?? Deno.cwd(),
      home,
      sandbox: options.sandbox,
      terminals: options.terminals,
    }),
    payload: job.payload,
    operator: daemonOperatorConfig(options.floor ?? {}, options.sandbox),
    places: { dataDir: options.floor?.dataDir, home },
  });
  checkRunInput(plan.input, plan.config);
  return plan;
}

/** A job whose run was started. */
interface StartedJob {
  handle: RunHandle;
  /** The job's run: its agent, warm or cold. */
  agent: AgentRun;
  /** The job's MCP proxy. */
  assets: JobMcpAssets;
  /** Every process group the job's launch registered. */
  groups: Set<number>;
  log: (entry: Record<string, unknown>) => void;
}

/** What {@linkcode startJobRun} starts. */
interface JobStart extends PlannedJob {
  job: DaemonJob;
  log: (entry: Record<string, unknown>) => void;
}

/** Starts the job's MCP proxy (when assets are on) and its engine run. */
function startJobRun(runner: JobRunnerState, start: JobStart): StartedJob {
  const { job, plan, request, setup, log, sentBefore } = start;
  const { command } = setup;
  const groups = new Set<number>();
  const registry: ReaperRegistry = {
    register(pgid) {
      groups.add(pgid);
      return runner.options.registry?.register(pgid) ?? { release() {} };
    },
  };
  runner.jobsByRun.set(plan.runId, job);
  const assets = createJobMcpAssets({
    job,
    plan,
    jobOfRun: (runId) => runner.jobsByRun.get(runId),
    log,
  });
  log({
    msg: "job started",
    provider: plan.config.provider,
    command: redactSecrets(command.commandText, command.secrets),
    command_source: command.commandSource,
    cwd: command.cwd,
  });
  // The hub builds RunnerResult from all_content: the wire keeps it.
  const withAllContent = createEventRestorer({ allContent: true });
  const hubAnswers = job.hubCapabilities.includes(PERMISSION_ASK_CAPABILITY);
  const { session: _, ...prepared } = setup;
  const agent = startAgentRun({
    ...prepared,
    runId: plan.runId,
    request,
    location: runner.location,
    assets: assets.hook,
    registry,
    mcpServers: plan.mcpServers,
    permissionAskUnavailable: hubAnswers ? undefined : ASK_UNAVAILABLE_HERE,
    log,
    emit(event) {
      // After run.cancel the client sends its own daemon_cancelled failure.
      if (isTerminalEvent(event) && job.signal.aborted) return;
      // Redacted here, whole: a hub other than runner serve's passes the
      // events on as they come, and the engine redacts only the text it
      // streams and the failures it words.
      const wire = toRelayEvent(withAllContent({
        ...redactDeep(event, setup.secrets),
        sequence: (event.sequence ?? 0) + sentBefore,
      }));
      job.emit(
        wire.event as unknown as JsonObject,
        wire.runner as JsonObject | undefined,
      );
    },
  });
  const { handle } = agent;
  if (hubAnswers) {
    job.onPermissionAnswer((requestId, answer) => {
      try {
        handle.answerPermission(requestId, answer as PermissionAnswer);
      } catch (error) {
        log({ msg: "permission answer refused", error: String(error) });
      }
    });
  }
  return { handle, agent, assets, groups, log };
}

/** Why `ask` falls back on a daemon whose hub cannot carry answers. */
const ASK_UNAVAILABLE_HERE =
  "the hub this daemon serves cannot carry permission answers (no permission.ask capability, e.g. LangBot's Python hub)";

/** Waits for the run's end and confirms that its processes are gone. */
async function finishJob(
  runner: JobRunnerState,
  started: StartedJob,
): Promise<DaemonJobResult> {
  const result = await started.handle.done;
  if (started.agent.kept()) {
    // The agent stays warm, in the pool, which tears it down later.
    started.log({ msg: "job ended", status: result.status, kept_warm: true });
    return { cleanupConfirmed: true };
  }
  // A launch that finished after a cancel was never handed to the engine.
  await (await started.agent.launched()?.catch(() => undefined))?.teardown();
  const confirmed = await confirmGroupsGone(started.groups, {
    graceMs: runner.killGraceMs,
    log: started.log,
    // The reaper tries again once the daemon starts anew.
    survived: (pgid) => runner.options.registry?.register(pgid),
  });
  started.log({
    msg: "job ended",
    status: result.status,
    code: result.code,
    cleanup_confirmed: confirmed,
  });
  return { cleanupConfirmed: confirmed };
}

/** Reports a job that never started (the message holds no env values). */
function emitFailure(job: DaemonJob, error: unknown, sequence = 1): void {
  const runId = job.payload.run_id;
  const wire = toRelayEvent({
    ...failedBeforeStartEvent(undefined, error),
    sequence,
  });
  const { run_id: _, ...event } = wire.event;
  job.emit(
    (typeof runId === "string"
      ? { run_id: runId, ...event }
      : event) as unknown as JsonObject,
    wire.runner as JsonObject | undefined,
  );
}

function codeOf(error: unknown): string {
  return toRunnerError(error).code;
}
