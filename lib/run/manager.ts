/**
 * The run manager: the glue between callers (CLI, HTTP API), the store and
 * the run engine. It looks up the stored session, picks the location, keeps
 * one active run per conversation (steering), records events and outcomes,
 * and stores `state.updated` session ids.
 *
 * @module
 */

import { prepareAgentLaunch } from "../agent/launch.ts";
import { runAssetsSecrets } from "../assets/request.ts";
import { RUN_CONFIG_KEYS, type RunConfig } from "../config.ts";
import { RunnerError, toRunnerError } from "../errors.ts";
import type { RunEvent } from "../events.ts";
import { isTerminalEvent } from "../events.ts";
import { failedBeforeStartEvent } from "./failure.ts";
import {
  createAgentLaunch,
  prepareLocalWorkspace,
} from "../locations/launch.ts";
import { buildPrompt } from "./prompt.ts";
import type { ReaperRegistry } from "../agent/reaper.ts";
import { type RunHandle, type RunResult, startRun } from "./engine.ts";
import { redactDeep } from "../secrets.ts";
import type { RunStore, SessionKey } from "../store/types.ts";
import type { RemoteRunner, RunAssetsHook, RunRequest } from "./request.ts";

export type { RemoteRunner, RunAssetsHook, RunRequest } from "./request.ts";

/** Options for {@linkcode createRunManager}. */
export interface RunManagerOptions {
  /** The store (sessions, runs, events). */
  store: RunStore;
  /** Records agent process groups for the reaper. */
  registry?: ReaperRegistry;
  /** The runner's environment (defaults to `Deno.env.toObject()`). */
  environment?: Record<string, string>;
  /** Extra secrets to redact (API and daemon tokens). */
  secrets?: string[];
  /** Structured log. */
  log?: (entry: Record<string, unknown>) => void;
  /** Runners for `remote-ssh` and `daemon` locations. */
  locations?: Partial<Record<"remote-ssh" | "daemon", RemoteRunner>>;
  /** Assets wiring. */
  assets?: RunAssetsHook;
}

/** An active run as the manager tracks it. */
export interface ManagedRun {
  /** The run id. */
  runId: string;
  /** The conversation. */
  conversationId?: string;
  /** The engine handle. */
  handle: RunHandle;
  /** Subscribes to events (past ones are in the store). */
  subscribe(listener: (event: RunEvent) => void): () => void;
  /** Resolves when the run has ended and its outcome is stored. */
  done: Promise<RunResult>;
}

/** Options for {@linkcode RunManager.start}. */
export interface StartOptions {
  /** Queue the input on the conversation's active run (default true). */
  steer?: boolean;
  /** Refuse (`http.too_many_runs`) when this many runs are already active. */
  maxActive?: number;
}

/** What {@linkcode RunManager.start} did. */
export type StartOutcome =
  | { kind: "started"; run: ManagedRun }
  | { kind: "steered"; run: ManagedRun };

/** Starts, steers, cancels and tracks runs. */
export interface RunManager {
  /** Starts a run, or queues the input on the conversation's active run. */
  start(request: RunRequest, options?: StartOptions): StartOutcome;
  /** The active run with this id. */
  get(runId: string): ManagedRun | undefined;
  /** The active run of a conversation. */
  activeForConversation(conversationId: string): ManagedRun | undefined;
  /** All active runs. */
  active(): ManagedRun[];
  /** Cancels every active run and waits for their terminal events. */
  shutdown(reason: RunnerError): Promise<void>;
}

/** The session-mapping key of a run. */
export function sessionKeyOf(
  conversationId: string,
  config: RunConfig,
  agentCommand: string,
): SessionKey {
  return {
    conversationId,
    provider: config.provider,
    location: config.location,
    target: config.location === "daemon"
      ? config.daemonId ?? ""
      : config.location === "remote-ssh"
      ? `${config.sshTarget}:${config.sshPort}`
      : "",
    workspace: config.workspace ?? "",
    agentCommand,
  };
}

/** A secret-free copy of a config for storage and display, with the kebab-case keys. */
export function publicConfig(config: RunConfig): Record<string, unknown> {
  const shown: Record<string, unknown> = {};
  for (const [key, spec] of Object.entries(RUN_CONFIG_KEYS)) {
    const value = config[spec.field];
    if (value === undefined) continue;
    shown[key] = spec.field === "envJson"
      ? Object.fromEntries(
        Object.keys(config.envJson).map((name) => [name, "[REDACTED]"]),
      )
      : value;
  }
  return shown;
}

/**
 * Checks the input's attachments (decoding, size limits) before anything
 * starts, as if the agent accepted every kind; throws the prompt's error.
 */
function validateInput(request: RunRequest): void {
  buildPrompt({
    input: request.input,
    capabilities: { image: true, audio: true, embeddedContext: true },
    limits: {
      maxAttachmentBytes: request.config.maxAttachmentMb * 1024 * 1024,
      maxPromptBytes: request.config.maxPromptMb * 1024 * 1024,
    },
  });
}

/** Makes a run manager. */
export function createRunManager(options: RunManagerOptions): RunManager {
  const { store } = options;
  const log = options.log ?? (() => {});
  const runs = new Map<string, ManagedRun>();
  const byConversation = new Map<string, ManagedRun>();
  const environment = options.environment ?? Deno.env.toObject();

  function start(
    request: RunRequest,
    startOptions: StartOptions = {},
  ): StartOutcome {
    const conversationId = request.conversationId;
    if (conversationId && startOptions.steer !== false) {
      const active = byConversation.get(conversationId);
      if (active) {
        const outcome = active.handle.steer(request.input);
        if (outcome === "queued") return { kind: "steered", run: active };
        if (outcome === "full") {
          throw new RunnerError(
            "run.steering_queue_full",
            "This conversation's run already holds 100 queued follow-ups. Wait for it to finish.",
          );
        }
      }
    }
    validateInput(request);
    const runId = request.runId ?? crypto.randomUUID();
    if (runs.has(runId) || store.getRun(runId)) {
      throw new RunnerError(
        "config.invalid",
        `run_id ${runId} already exists; use a new run_id.`,
      );
    }
    const location = request.config.location;
    const remote = location === "local" || location === "remote-ssh"
      ? undefined
      : options.locations?.[location];
    if (location !== "local" && location !== "remote-ssh" && !remote) {
      throw new RunnerError(
        "config.invalid",
        `location=${location} is not available in this runner${
          location === "daemon"
            ? " (start runner serve with --daemon-enabled)"
            : ""
        }.`,
      );
    }
    if (
      startOptions.maxActive !== undefined &&
      runs.size >= startOptions.maxActive
    ) {
      throw new RunnerError(
        "http.too_many_runs",
        `The runner already runs ${startOptions.maxActive} runs (--max-concurrent-runs). Retry shortly.`,
      );
    }
    const launch = prepareAgentLaunch(request.config, { environment });
    if (location === "local") prepareLocalWorkspace(launch.cwd);
    const secrets = [
      ...launch.secrets,
      ...(options.secrets ?? []),
      ...runAssetsSecrets(request.assets),
    ];
    const key = conversationId
      ? sessionKeyOf(conversationId, request.config, launch.commandText)
      : undefined;
    const stored = key && request.config.reuseSession
      ? store.getSession(key)?.sessionId
      : undefined;
    store.createRun({
      runId,
      conversationId,
      config: redactDeep(publicConfig(request.config), secrets),
      status: "active",
    });
    const listeners = new Set<(event: RunEvent) => void>();
    const emit = (raw: RunEvent) => {
      const event = redactDeep(raw, secrets);
      try {
        record(event);
      } catch (error) {
        // The run goes on for its live listeners even if the store fails.
        log({
          msg: "storing a run event failed",
          run_id: runId,
          type: event.type,
          error: toRunnerError(error).message,
        });
      }
      for (const listener of listeners) {
        try {
          listener(event);
        } catch (error) {
          log({
            msg: "event listener failed",
            run_id: runId,
            error: String(error),
          });
        }
      }
    };
    const record = (event: RunEvent) => {
      store.appendEvent(runId, event);
      if (
        event.type === "state.updated" && key &&
        event.data.key === "external.acp_session_id"
      ) {
        store.putSession(key, String(event.data.value));
      }
      if (isTerminalEvent(event)) {
        store.finishRun(runId, {
          status: event.type === "run.completed"
            ? "completed"
            : event.data.code === "run.cancelled"
            ? "cancelled"
            : "failed",
          code: event.data.code as string | undefined,
          error: event.data.error as string | undefined,
        });
        store.flush();
      }
    };
    const runLog = (entry: Record<string, unknown>) =>
      log(redactDeep({ run_id: runId, ...entry }, secrets));
    let handle: RunHandle;
    try {
      if (remote) {
        handle = remote({
          runId,
          request,
          storedSessionId: stored,
          secrets,
          emit,
          log: runLog,
        });
      } else {
        const prepared = createAgentLaunch({
          runId,
          request,
          launch,
          assets: options.assets,
          registry: options.registry,
          secrets,
        });
        handle = startRun({
          runId,
          conversationId,
          input: request.input,
          config: request.config,
          storedSessionId: stored,
          sessionCwd: request.config.sessionCwd ?? launch.cwd,
          secrets,
          emit,
          log: runLog,
          launch: prepared.launch,
        });
        handle.done.finally(prepared.release);
      }
    } catch (error) {
      emit(failedBeforeStartEvent(runId, error));
      throw toRunnerError(error);
    }
    const managed: ManagedRun = {
      runId,
      conversationId,
      handle,
      subscribe(listener) {
        listeners.add(listener);
        return () => listeners.delete(listener);
      },
      done: handle.done.then((result) => {
        runs.delete(runId);
        if (conversationId && byConversation.get(conversationId) === managed) {
          byConversation.delete(conversationId);
        }
        return result;
      }),
    };
    runs.set(runId, managed);
    if (conversationId) byConversation.set(conversationId, managed);
    log({
      msg: "run started",
      run_id: runId,
      location,
      provider: request.config.provider,
    });
    return { kind: "started", run: managed };
  }

  return {
    start,
    get: (runId) => runs.get(runId),
    activeForConversation: (id) => byConversation.get(id),
    active: () => [...runs.values()],
    async shutdown(reason) {
      const active = [...runs.values()];
      for (const run of active) run.handle.cancel(reason);
      await Promise.all(active.map((run) => run.done));
    },
  };
}
