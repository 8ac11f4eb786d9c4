/**
 * A run whose registry agent must be downloaded and installed before it can
 * start: the run exists (its callers follow it) while it waits, its
 * `agent.installing` events report the download, then the agent starts and
 * its events follow, numbered on. A cancel while it waits ends the run at
 * once (the install finishes in the background: a whole install is kept
 * for the next run). See `docs/registry.md`.
 *
 * @module
 */

import { RunnerError, toRunnerError } from "../errors.ts";
import type { RunEvent } from "../events.ts";
import type { RegistryContext, RegistryLaunch } from "../providers.ts";
import { failureEventData } from "./failure.ts";
import type { RunHandle } from "./lifecycle.ts";
import type { RunInput } from "./prompt.ts";
import { STEERING_QUEUE_LIMIT, type SteerOutcome } from "./steering.ts";
import type { RunResult } from "./types.ts";

/** The event a waiting run gets as its agent's archive arrives. */
export const AGENT_INSTALLING = "agent.installing";

/** A new `agent.installing` event at least every this many bytes received. */
const PROGRESS_STEP_BYTES = 1024 * 1024;

/** The download progress {@linkcode installingEvents} reports. */
export type InstallProgress = Parameters<
  NonNullable<RegistryContext["onProgress"]>
>[0];

/**
 * A progress callback that emits `agent.installing` (`{id, version,
 * received, total?}`) for the first bytes, each further
 * {@linkcode PROGRESS_STEP_BYTES}, and the last ones.
 */
export function installingEvents(
  emit: (type: string, data: Record<string, unknown>) => void,
): (progress: InstallProgress) => void {
  let shown: number | undefined;
  return ({ id, version, received, total }) => {
    const whole = total !== undefined && received >= total;
    const step = Math.floor(received / PROGRESS_STEP_BYTES);
    if (
      shown !== undefined && !whole &&
      step === Math.floor(shown / PROGRESS_STEP_BYTES)
    ) return;
    if (shown === received) return;
    shown = received;
    emit(AGENT_INSTALLING, {
      id,
      version,
      received,
      ...(total === undefined ? {} : { total }),
    });
  };
}

/** Options for {@linkcode installFirst}. */
export interface InstallFirstOptions {
  /** The run id stamped on the run's own events. */
  runId: string;
  /** The conversation (follow-ups wait for the agent when there is one). */
  conversationId?: string;
  /** Downloads and installs the agent, reporting progress. */
  install(
    onProgress: (progress: InstallProgress) => void,
  ): Promise<RegistryLaunch>;
  /** Whether progress events are wanted (`streaming`). */
  progress: boolean;
  /** Receives the run's numbered events. */
  emit: (event: RunEvent) => void;
  /** Values redacted from the run's failure. */
  secrets: readonly string[];
  /** Sets the run up for the installed agent and starts it; `emit` takes its events numbered from 1. */
  start(
    launch: RegistryLaunch,
    emit: (event: RunEvent) => void,
  ): Promise<RunHandle>;
}

/** The handle of a run that installs its agent first, then runs it. */
export function installFirst(options: InstallFirstOptions): RunHandle {
  const { runId } = options;
  let sequence = 0;
  const emitOwn = (type: string, data: Record<string, unknown>) =>
    options.emit({
      run_id: runId,
      type,
      data,
      sequence: ++sequence,
      timestamp: Date.now(),
    });
  const queued: RunInput[] = [];
  const stop = Promise.withResolvers<never>();
  let stopped: RunnerError | undefined;
  let ended = false;
  let agent: RunHandle | undefined;
  const fail = (error: unknown): RunResult => {
    const failure = toRunnerError(error);
    emitOwn(
      "run.failed",
      failureEventData({
        failure,
        unprocessed: queued.splice(0),
        secrets: options.secrets,
      }),
    );
    ended = true;
    return failure.code === "run.cancelled"
      ? { status: "cancelled", code: failure.code }
      : { status: "failed", code: failure.code };
  };
  const onProgress = installingEvents((type, data) => {
    if (!ended && options.progress) emitOwn(type, data);
  });
  const done = (async (): Promise<RunResult> => {
    let launch: RegistryLaunch;
    try {
      launch = await Promise.race([options.install(onProgress), stop.promise]);
      agent = await options.start(
        launch,
        (event) =>
          options.emit({
            ...event,
            sequence: (event.sequence ?? 0) + sequence,
          }),
      );
    } catch (error) {
      return fail(stopped ?? error);
    }
    if (stopped) agent.cancel(stopped);
    for (const input of queued.splice(0)) agent.steer(input);
    return await agent.done;
  })();
  // A cancel that wins the race leaves the install to finish on its own.
  stop.promise.catch(() => {});
  return {
    runId,
    steer(input): SteerOutcome {
      if (agent) return agent.steer(input);
      if (ended || stopped || !options.conversationId) return "closed";
      if (queued.length >= STEERING_QUEUE_LIMIT) return "full";
      queued.push(input);
      return "queued";
    },
    cancel(reason) {
      if (agent) return agent.cancel(reason);
      stopped ??= reason ??
        new RunnerError("run.cancelled", "The run was cancelled.");
      stop.reject(stopped);
    },
    answerPermission(requestId, answer) {
      if (agent) return agent.answerPermission(requestId, answer);
      return "unknown";
    },
    done,
  };
}
