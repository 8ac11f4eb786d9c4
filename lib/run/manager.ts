/**
 * The run manager: the glue between callers (CLI, HTTP API), the store and
 * the run engine. It looks up the stored session, picks the location, keeps
 * one active run per conversation (steering), records events and outcomes,
 * and stores `state.updated` session ids and remembered session config
 * values.
 *
 * @module
 */

import type { AgentCommand } from "../agent/launch.ts";
import { RUN_CONFIG_KEYS, type RunConfig } from "../config.ts";
import {
  daemonRegistryVersion,
  planRegistryProvider,
  type RegistryContext,
  type RegistryLaunch,
} from "../providers.ts";
import { runAssetsSecrets } from "../assets/request.ts";
import { installFirst, type InstallFirstOptions } from "./install_first.ts";
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
import {
  createRunRecorder,
  type RunRecorder,
  type RunRecorderOptions,
} from "./recording.ts";
import type { ReaperRegistry } from "../agent/reaper.ts";
import type { RunHandle } from "./engine.ts";
import { redactDeep, redactSecrets, secretsOf } from "../secrets.ts";
import type { RunStore, SessionKey } from "../store/types.ts";
import type { RunAssetsHook, RunRequest } from "./request.ts";
import type { RunLocations } from "./location.ts";
import { startAgentRun } from "./agent_run.ts";
import {
  type KeptSession,
  type RunSetup,
  type RunSetupOptions,
  setUpRun,
} from "./setup.ts";
import { sessionSettingsFrom } from "./session_memory.ts";
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

/** The conversation's kept session, its remembered values and its latest run, from the store. */
async function storedSession(
  store: RunStore,
  request: RunRequest,
  command: AgentCommand,
): Promise<KeptSession> {
  const { conversationId, config } = request;
  if (!conversationId) return {};
  const key = sessionKeyOf(
    conversationId,
    config,
    command.sessionCommand ?? command.commandText,
  );
  const stored = await store.getSession(key);
  const storedSessionId = config.reuseSession ? stored?.sessionId : undefined;
  const [previous] = storedSessionId
    ? await store.listRuns({ conversationId, limit: 1 })
    : [];
  return {
    key,
    storedSessionId,
    remembered: sessionSettingsFrom(stored?.settings),
    previousRunId: previous?.runId,
    ...(storedSessionId && stored?.cost ? { cost: stored.cost } : {}),
  };
}

/** Starts the run at its location: its agent here or over SSH, or its turns on a daemon. */
function startAtLocation(
  manager: RunManagerOptions,
  { runId, request, setup, emit, log }: {
    runId: string;
    request: RunRequest;
    setup: RunSetup;
    emit: (event: RunEvent) => void;
    log: (entry: Record<string, unknown>) => void;
  },
): RunHandle {
  const { session: _, ...prepared } = setup;
  return startAgentRun({
    ...prepared,
    runId,
    request,
    // Admission checked that the run's location is there.
    location: manager.locations[request.config.location]!,
    assets: manager.assets,
    registry: manager.registry,
    history: { runId, previousRunId: setup.session.previousRunId },
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
 * tracks it until it ends. A launch that throws is recorded as failed. A
 * registry agent that must be downloaded first is installed inside the run
 * (`install_first.ts`); a hub's daemon run of one is pinned to the version
 * the hub resolved.
 */
async function startAdmittedRun(
  state: ManagerState,
  given: RunRequest,
  { admission, onEvent }: {
    admission: Admission;
    onEvent?: StartOptions["onEvent"];
  },
): Promise<ManagedRun> {
  const { runId } = admission;
  const { options, log } = state;
  const { store } = options;
  const request = await pinnedForDaemon(given, options.agentRegistry);
  const registry = options.agentRegistry &&
    await planRegistryProvider(request.config, options.agentRegistry);
  if (registry && !("launch" in registry)) {
    return await startAfterInstall(state, request, {
      admission,
      onEvent,
      install: registry.install,
    });
  }
  const setup = await setUpRun(setUpOptions(state, request, registry?.launch));
  const { secrets } = setup;
  await recordRunStart(store, { request, runId, secrets });
  const { storedSessionId, cost } = setup.session;
  const recorder = createRunRecorder({
    store,
    runId,
    sessionKey: setup.session.key,
    sessionCost: storedSessionId
      ? { sessionId: storedSessionId, cost }
      : undefined,
    secrets,
    log,
  });
  if (onEvent) recorder.subscribe(onEvent);
  let handle: RunHandle;
  try {
    handle = startAtLocation(options, {
      runId,
      request,
      setup,
      emit: recorder.emit,
      log: (entry) => log(redactDeep({ run_id: runId, ...entry }, secrets)),
    });
  } catch (error) {
    recorder.emit(failedBeforeStartEvent(runId, error));
    // Its listeners have the failure (once stored) before the caller does.
    await recorder.settled();
    throw toRunnerError(error);
  }
  logStarted(state, { runId, request, setup });
  return followRun(state, { runId, request, handle, recorder });
}

/** What {@linkcode setUpRun} needs for a request of this manager's. */
function setUpOptions(
  state: ManagerState,
  request: RunRequest,
  launch: RegistryLaunch | undefined,
): RunSetupOptions {
  const { options } = state;
  return {
    request,
    environment: state.environment,
    location: options.locations[request.config.location],
    secrets: options.secrets,
    findSession: (command) => storedSession(options.store, request, command),
    warm: { pool: options.warmPool },
    resolveRegistry: () => Promise.resolve(launch),
  };
}

/**
 * A hub's daemon run of a registry agent, pinned to the version the hub
 * resolved: the daemon installs exactly that one (`docs/registry.md`).
 */
async function pinnedForDaemon(
  request: RunRequest,
  context: RegistryContext | undefined,
): Promise<RunRequest> {
  if (!context) return request;
  const version = await daemonRegistryVersion(request.config, context);
  if (!version || version === request.config.providerVersion) return request;
  return {
    ...request,
    config: { ...request.config, providerVersion: version },
  };
}

/**
 * Starts a run whose registry agent is downloaded and installed first: the
 * run is stored and followed at once, its `agent.installing` events tell
 * its callers what it waits for, then it is set up and launched.
 */
async function startAfterInstall(
  state: ManagerState,
  request: RunRequest,
  { admission, onEvent, install }: {
    admission: Admission;
    onEvent?: StartOptions["onEvent"];
    install: InstallFirstOptions["install"];
  },
): Promise<ManagedRun> {
  const { runId } = admission;
  const { options, log } = state;
  const { store } = options;
  const { config } = request;
  // What setUpRun will redact, known before the agent is (live: it grows).
  const secrets = [
    ...secretsOf({
      envJson: config.envJson,
      environment: state.environment,
      secretNames: config.secretEnvNames,
    }),
    ...(options.secrets ?? []),
    ...runAssetsSecrets(request.assets),
  ];
  await recordRunStart(store, { request, runId, secrets });
  const recording: RunRecorderOptions = { store, runId, secrets, log };
  const recorder = createRunRecorder(recording);
  if (onEvent) recorder.subscribe(onEvent);
  const handle = installFirst({
    runId,
    conversationId: request.conversationId,
    install,
    progress: config.streaming,
    emit: recorder.emit,
    secrets,
    async start(launch, emit) {
      const setup = await setUpRun(setUpOptions(state, request, launch));
      for (const value of setup.secrets) {
        if (!secrets.includes(value)) secrets.push(value);
      }
      recording.sessionKey = setup.session.key;
      const { storedSessionId, cost } = setup.session;
      if (storedSessionId) {
        recording.sessionCost = { sessionId: storedSessionId, cost };
      }
      const started = startAtLocation(options, {
        runId,
        request,
        setup,
        emit,
        log: (entry) => log(redactDeep({ run_id: runId, ...entry }, secrets)),
      });
      logStarted(state, { runId, request, setup });
      return started;
    },
  });
  log({
    msg: "run waits for its agent's install",
    run_id: runId,
    conversation_id: request.conversationId,
    provider: config.provider,
  });
  return followRun(state, { runId, request, handle, recorder });
}

function logStarted(
  state: ManagerState,
  { runId, request, setup }: {
    runId: string;
    request: RunRequest;
    setup: RunSetup;
  },
): void {
  const { command, secrets } = setup;
  state.log({
    msg: "run started",
    run_id: runId,
    conversation_id: request.conversationId,
    location: request.config.location,
    provider: request.config.provider,
    command: redactSecrets(command.commandText, secrets),
    command_source: command.commandSource,
  });
}

/** Tracks a started run until it ends and its outcome is stored. */
function followRun(
  state: ManagerState,
  { runId, request, handle, recorder }: {
    runId: string;
    request: RunRequest;
    handle: RunHandle;
    recorder: RunRecorder;
  },
): ManagedRun {
  const unwatch = stopWhenFenced(state.options.store, runId, handle);
  // A run is done once its outcome and session id are stored, too.
  const stored = handle.done.then(async (result) => {
    await recorder.settled();
    unwatch?.();
    return result;
  });
  const run = trackRun(state.active, {
    runId,
    conversationId: request.conversationId,
    handle: { ...handle, done: stored },
    subscribe: recorder.subscribe,
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

/**
 * Makes a run manager.
 *
 * @example Run one prompt on a local ACP agent and read its answer back
 * ```ts
 * import assert from "node:assert/strict";
 * import { parseRunConfig } from "../config.ts";
 * import { RunnerError } from "../errors.ts";
 * import { runnerLocations } from "../locations/runner_locations.ts";
 * import { openStore } from "../store/open.ts";
 * import { createRunManager } from "./manager.ts";
 *
 * const dataDir = await Deno.makeTempDir();
 * const workspace = await Deno.makeTempDir();
 * const store = await openStore({ dataDir });
 * const manager = createRunManager({ store, locations: runnerLocations() });
 * try {
 *   // The repository's fixture agent speaks ACP; any ACP agent's command fits.
 *   const root = new URL("../../", import.meta.url).pathname;
 *   const config = parseRunConfig({
 *     provider: "custom",
 *     "acp-command":
 *       `'${Deno.execPath()}' run -A --config '${root}deno.json' '${root}tests/fixtures/agent.ts'`,
 *     workspace,
 *   });
 *   const { run } = await manager.start({ input: { text: "hello" }, config });
 *   assert.equal((await run.done).status, "completed");
 *   // The run's events stay in the store: here the agent echoed the prompt.
 *   const events = await store.getEvents(run.runId);
 *   const answer = events.find((event) => event.type === "message.completed");
 *   assert.deepEqual(answer?.data.message, {
 *     role: "assistant",
 *     content: "echo: hello (turn 1)",
 *   });
 *   assert.equal(events.at(-1)?.type, "run.completed");
 * } finally {
 *   await manager.shutdown(new RunnerError("runner.shutting_down", "Done."));
 *   await store.close();
 *   await Deno.remove(dataDir, { recursive: true });
 *   await Deno.remove(workspace, { recursive: true });
 * }
 * ```
 */
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
    prompt: firstPrompt(request.input.text, secrets),
    status: "active",
  });
}

/**
 * A run's first input text, secrets redacted, whole: transcripts (and `/acp`
 * loads) give it back; listings show its start.
 */
function firstPrompt(
  text: string | undefined,
  secrets: Iterable<string>,
): string | undefined {
  return text ? redactSecrets(text, secrets) : undefined;
}
