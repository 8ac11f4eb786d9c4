/**
 * The run manager: the glue between callers (CLI, HTTP API), the store and
 * the run engine. It looks up the stored session, picks the location, keeps
 * one active run per conversation (steering), records events and outcomes,
 * and stores `state.updated` session ids and remembered session config
 * values.
 *
 * @module
 */

import { type AgentCommand } from "../agent/launch.ts";
import {
  prepareAgentCommand,
  type RegistryContext,
  resolveRegistryProvider,
} from "../providers.ts";
import { runAssetsSecrets } from "../assets/request.ts";
import { RUN_CONFIG_KEYS, type RunConfig } from "../config.ts";
import { RunnerError, toRunnerError } from "../errors.ts";
import type { RunEvent } from "../events.ts";
import { failedBeforeStartEvent } from "./failure.ts";
import {
  type ActiveRuns,
  type ManagedRun,
  steerActiveRun,
  trackRun,
} from "./active_runs.ts";
import { type Admission, admitRun, assertRunIdUnused } from "./admission.ts";
import { oneAtATime } from "./one_at_a_time.ts";
import { createRunRecorder } from "./recording.ts";
import type { ReaperRegistry } from "../agent/reaper.ts";
import type { RunHandle } from "./engine.ts";
import { redactDeep, redactSecrets } from "../secrets.ts";
import type { RunStore, SessionKey } from "../store/types.ts";
import type { RunAssetsHook, RunRequest } from "./request.ts";
import type { RunLocations } from "./location.ts";
import { startAgentRun } from "./agent_run.ts";
import { warmPlaceOf } from "./targets.ts";
import { type SessionSettings, sessionSettingsFrom } from "./session_memory.ts";
import { flooredMemory, restoreRefusal } from "./caller_floor.ts";
import type { WarmPool } from "./warm/pool.ts";

export type { RunAssetsHook, RunRequest } from "./request.ts";
export type { ManagedRun } from "./active_runs.ts";

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
  /** Where runs go, by `location` (the entry point chooses them). */
  locations: RunLocations;
  /** Assets wiring. */
  assets?: RunAssetsHook;
  /** Keeps conversations' agents warm between runs (`docs/runs.md`). */
  warmPool?: WarmPool;
  /** Where registry agents are looked up and installed (`docs/registry.md`); unset: `provider` names presets and `custom` only. */
  agentRegistry?: RegistryContext;
}

/** Options for {@linkcode RunManager.start}. */
export interface StartOptions {
  /** Queue the input on the conversation's active run (default true). */
  steer?: boolean;
  /** Refuse (`http.too_many_runs`) when this many runs are already active. */
  maxActive?: number;
  /** Receives every event of a started run, from its first one on. */
  onEvent?: (event: RunEvent) => void;
}

/** What {@linkcode RunManager.start} did. */
export type StartOutcome =
  | { kind: "started"; run: ManagedRun }
  | { kind: "steered"; run: ManagedRun };

/** Starts, steers, cancels and tracks runs. */
export interface RunManager {
  /**
   * Starts a run, or queues the input on the conversation's active run.
   * Starts of one conversation are handled one after the other; with
   * `steer: false` a conversation that has an active run is refused with
   * `http.conversation_busy`.
   */
  start(request: RunRequest, options?: StartOptions): Promise<StartOutcome>;
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

/** What a run needs resolved before it starts. */
interface RunSetup {
  /** The agent's command, environment and directory. */
  command: AgentCommand;
  /** Every value to redact from the run's config, events and logs. */
  secrets: string[];
  /** Where the conversation's agent session id is stored. */
  sessionKey?: SessionKey;
  /** The agent session to resume, when reuse is on and one is stored. */
  storedSessionId?: string;
  /** What the conversation remembers of its session's config values (`{}`: nothing yet). */
  sessionMemory?: SessionSettings;
  /** Why the stored session may not be restored under the operator's floor. */
  sessionNotRestored?: string;
  /** The conversation's latest run so far (a warm agent must have seen it). */
  previousRunId?: string;
}

/** The manager's part in {@linkcode setUpRun}. */
interface RunSetupContext {
  store: RunStore;
  environment: Record<string, string>;
  /** The runner's own secrets (API and daemon tokens). */
  secrets?: string[];
  locations: RunLocations;
  agentRegistry?: RegistryContext;
}

/** Resolves the agent command, the secrets and the session to resume. */
async function setUpRun(
  request: RunRequest,
  context: RunSetupContext,
): Promise<RunSetup> {
  const { conversationId, config } = request;
  const registry = context.agentRegistry
    ? await resolveRegistryProvider(config, context.agentRegistry)
    : undefined;
  const command = prepareAgentCommand(config, {
    environment: context.environment,
    registry,
  });
  context.locations[config.location]?.prepare(command);
  const secrets = [
    ...command.secrets,
    ...(context.secrets ?? []),
    ...runAssetsSecrets(request.assets),
  ];
  const sessionKey = conversationId
    ? sessionKeyOf(
      conversationId,
      config,
      command.sessionCommand ?? command.commandText,
    )
    : undefined;
  const stored = sessionKey
    ? await context.store.getSession(sessionKey)
    : undefined;
  const storedSessionId = config.reuseSession ? stored?.sessionId : undefined;
  const [previous] = storedSessionId
    ? await context.store.listRuns({ conversationId, limit: 1 })
    : [];
  const remembered = sessionSettingsFrom(stored?.settings);
  return {
    command,
    secrets,
    sessionKey,
    storedSessionId,
    sessionMemory: sessionKey
      ? rememberedWithinFloor(request, remembered)
      : undefined,
    sessionNotRestored: storedSessionId && request.sessionChoices
      ? restoreRefusal(request.sessionChoices, remembered, config)
      : undefined,
    previousRunId: previous?.runId,
  };
}

/**
 * The remembered values a caller of this run could still ask for: a value
 * remembered before the operator narrowed the choices is not asked again.
 */
function rememberedWithinFloor(
  request: RunRequest,
  remembered: SessionSettings,
): SessionSettings {
  if (!request.sessionChoices) return remembered;
  return flooredMemory(request.sessionChoices, remembered).settings;
}

/** Options for {@linkcode startAtLocation}. */
interface RunStartOptions {
  runId: string;
  request: RunRequest;
  command: AgentCommand;
  storedSessionId?: string;
  sessionNotRestored?: string;
  sessionMemory?: SessionSettings;
  previousRunId?: string;
  secrets: string[];
  emit: (event: RunEvent) => void;
  log: (entry: Record<string, unknown>) => void;
  options: RunManagerOptions;
}

/** Starts the run at its location: its agent here or over SSH, or its turns on a daemon. */
function startAtLocation(options: RunStartOptions): RunHandle {
  const {
    runId,
    request,
    command,
    storedSessionId,
    sessionMemory,
    secrets,
    emit,
    log,
  } = options;
  const { options: manager } = options;
  // Admission checked that the run's location is there.
  const location = request.config.location;
  return startAgentRun({
    runId,
    request,
    command,
    location: manager.locations[location]!,
    assets: manager.assets,
    registry: manager.registry,
    secrets,
    storedSessionId,
    sessionNotRestored: options.sessionNotRestored,
    sessionMemory,
    sessionCwd: request.config.sessionCwd ?? command.cwd,
    warm: warmPlaceOf(request, command, {
      pool: manager.warmPool,
      sessionMemory,
    }),
    history: { runId, previousRunId: options.previousRunId },
    emit,
    log,
    permissionAskUnavailable: request.permissionAskUnavailable,
  }).handle;
}

/** What the manager's steps share. */
interface ManagerState {
  options: RunManagerOptions;
  log: (entry: Record<string, unknown>) => void;
  environment: Record<string, string>;
  active: ActiveRuns;
}

/**
 * Starts an admitted run: stores it, records its events, launches it and
 * tracks it until it ends. A launch that throws is recorded as failed.
 */
async function startAdmittedRun(
  state: ManagerState,
  request: RunRequest,
  { admission, onEvent }: {
    admission: Admission;
    onEvent?: StartOptions["onEvent"];
  },
): Promise<ManagedRun> {
  const { runId } = admission;
  const { options, log } = state;
  const { store } = options;
  const { conversationId, config } = request;
  const setup = await setUpRun(request, {
    store,
    environment: state.environment,
    secrets: options.secrets,
    locations: options.locations,
    agentRegistry: options.agentRegistry,
  });
  const { command, secrets, sessionKey } = setup;
  await recordRunStart(store, { request, runId, secrets });
  const recorder = createRunRecorder({
    store,
    runId,
    sessionKey,
    secrets,
    log,
  });
  if (onEvent) recorder.subscribe(onEvent);
  let handle: RunHandle;
  try {
    handle = startAtLocation({
      runId,
      request,
      command,
      storedSessionId: setup.storedSessionId,
      sessionNotRestored: setup.sessionNotRestored,
      sessionMemory: setup.sessionMemory,
      previousRunId: setup.previousRunId,
      secrets,
      emit: recorder.emit,
      log: (entry) => log(redactDeep({ run_id: runId, ...entry }, secrets)),
      options,
    });
  } catch (error) {
    recorder.emit(failedBeforeStartEvent(runId, error));
    // Its listeners have the failure (once stored) before the caller does.
    await recorder.settled();
    throw toRunnerError(error);
  }
  const unwatch = stopWhenFenced(store, runId, handle);
  // A run is done once its outcome and session id are stored, too.
  const stored = handle.done.then(async (result) => {
    await recorder.settled();
    unwatch?.();
    return result;
  });
  const run = trackRun(state.active, {
    runId,
    conversationId,
    handle: { ...handle, done: stored },
    subscribe: recorder.subscribe,
  });
  log({
    msg: "run started",
    run_id: runId,
    conversation_id: conversationId,
    location: config.location,
    provider: config.provider,
    command: redactSecrets(command.commandText, secrets),
    command_source: command.commandSource,
  });
  // Whoever awaited start() subscribes within this task; later ones read the store.
  setTimeout(recorder.stopReplay, 0);
  return run;
}

/**
 * In a fleet: stops the run at once when this replica may no longer write it
 * (it lost its lease); returns the function that stops watching.
 */
function stopWhenFenced(
  store: RunStore,
  runId: string,
  handle: RunHandle,
): (() => void) | undefined {
  return store.watchFence?.(runId, () =>
    handle.cancel(
      new RunnerError(
        "runner.replica_lost",
        "This replica lost its fleet lease while the run was active, so the fleet ended the run; start it again (any replica can take it).",
      ),
    ));
}

/** Steers into the conversation's active run, or admits and starts a new run. */
async function steerOrStart(
  state: ManagerState,
  request: RunRequest,
  startOptions: StartOptions,
): Promise<StartOutcome> {
  const { options, active } = state;
  // A request naming an existing run is a repeat, never a follow-up.
  await assertRunIdUnused(request.runId, { store: options.store, active });
  if (startOptions.steer !== false) {
    const steered = steerActiveRun(request, active);
    if (steered) return { kind: "steered", run: steered };
  } else if (
    request.conversationId && active.byConversation.has(request.conversationId)
  ) {
    throw new RunnerError(
      "http.conversation_busy",
      `Conversation ${request.conversationId} has an active run; retry once it has ended.`,
    );
  }
  const admission = await admitRun({
    request,
    maxActive: startOptions.maxActive,
    store: options.store,
    active,
    locations: options.locations,
  });
  try {
    const run = await startAdmittedRun(state, request, {
      admission,
      onEvent: startOptions.onEvent,
    });
    return { kind: "started", run };
  } finally {
    active.starting.delete(admission.runId);
  }
}

/** Makes a run manager. */
export function createRunManager(options: RunManagerOptions): RunManager {
  const state: ManagerState = {
    options,
    log: options.log ?? (() => {}),
    active: { byId: new Map(), byConversation: new Map(), starting: new Set() },
    environment: options.environment ?? Deno.env.toObject(),
  };
  const { active } = state;
  const startsByConversation = new Map<string, Promise<void>>();

  /**
   * A follow-up (no run id of its own) steers into the conversation's active
   * run at once when none of the conversation's starts is under way: it
   * lands at the exact point of the run it arrives at.
   */
  function steerNow(
    request: RunRequest,
    startOptions: StartOptions,
  ): Promise<StartOutcome> | undefined {
    const { conversationId } = request;
    if (
      request.runId || startOptions.steer === false || !conversationId ||
      startsByConversation.has(conversationId)
    ) return undefined;
    try {
      const run = steerActiveRun(request, active);
      return run ? Promise.resolve({ kind: "steered", run }) : undefined;
    } catch (error) {
      return Promise.reject(error);
    }
  }

  return {
    start(request, startOptions = {}) {
      const steered = steerNow(request, startOptions);
      if (steered) return steered;
      return oneAtATime(
        startsByConversation,
        request.conversationId,
        () => steerOrStart(state, request, startOptions),
      );
    },
    get: (runId) => active.byId.get(runId),
    activeForConversation: (id) => active.byConversation.get(id),
    active: () => [...active.byId.values()],
    async shutdown(reason) {
      const runs = [...active.byId.values()];
      for (const run of runs) run.handle.cancel(reason);
      await Promise.all(runs.map((run) => run.done));
    },
  };
}

/** Stores the active run: its public config and prompt, secrets redacted. */
function recordRunStart(
  store: RunStore,
  { request, runId, secrets }: {
    request: RunRequest;
    runId: string;
    secrets: readonly string[];
  },
): Promise<void> {
  return store.createRun({
    runId,
    conversationId: request.conversationId,
    config: redactDeep(publicConfig(request.config), secrets),
    prompt: promptSnippet(request.input.text, secrets),
    status: "active",
  });
}

/** Characters of the first input's text a run record keeps. */
const PROMPT_SNIPPET_CHARS = 200;

/** The start of a run's first input text, secrets redacted before it is cut. */
function promptSnippet(
  text: string | undefined,
  secrets: Iterable<string>,
): string | undefined {
  if (!text) return undefined;
  return [...redactSecrets(text, secrets)].slice(0, PROMPT_SNIPPET_CHARS)
    .join("");
}
