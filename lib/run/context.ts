/**
 * The state one run's steps share: its options, events, steering queue,
 * abort signal, and what starting the agent has established so far.
 *
 * @module
 */

import type { PromptCapabilities } from "@agentclientprotocol/sdk";
import type { AgentConnection } from "../acp/client.ts";
import type { TerminalHost } from "../acp/terminals.ts";
import type { SessionState } from "../acp/session_state.ts";
import type { RunConfig } from "../config.ts";
import type { TurnState } from "./events.ts";
import { createDeltaCoalescer, type DeltaCoalescer } from "./coalesce.ts";
import {
  createPermissionDesk,
  type PermissionDesk,
} from "./permission_desk.ts";
import { createRunLifecycle, type RunLifecycle } from "./lifecycle.ts";
import type { AgentTransport, RunEngineOptions } from "./types.ts";
import type { FailedTool, RejectedPermission } from "./unanswered.ts";
import type { LiveUpdateRedactor } from "./live_updates.ts";

/**
 * One run's shared state; the engine's steps read and update it in place.
 * Its life (events, timeout, cancel, follow-ups) is `lifecycle.ts`'s.
 */
export interface RunContext extends RunLifecycle {
  /** The run's options. */
  readonly options: RunEngineOptions;
  /** The validated config (`options.config`). */
  readonly config: RunConfig;
  /**
   * Values redacted from anything the run reports; only the run function
   * that owns the list (`agent_run.ts`) adds to it, with the secrets the
   * location or a warm agent's companion returned.
   */
  readonly secrets: readonly string[];
  /**
   * Where the run's events go: text chunks are coalesced into deltas, then
   * events are numbered and only one terminal event is let through.
   */
  readonly emitter: DeltaCoalescer;
  /** The assistant message of the open turn; undefined between turns. */
  turn?: TurnState;
  /**
   * Whether updates are dropped as `session/load` replay: from the load until
   * the replay has gone quiet and the first prompt is sent.
   */
  replaying: boolean;
  /** How many replayed updates were dropped. */
  replayedUpdates: number;
  /** The last permission request answered reject or cancelled. */
  rejectedPermission?: RejectedPermission;
  /** The last tool call that ended with status `failed`. */
  failedTool?: FailedTool;
  /**
   * When the agent last sent an update (`performance.now()`), kept while it
   * matters: during a replay and while a quiet window waits (a clock read
   * per streamed chunk would cost more than the rest of its handling).
   */
  lastUpdateAt: number;
  /** Whether a quiet window is waiting for the agent to go silent. */
  awaitingQuiet: boolean;
  /** The live updates' redaction, once `onSessionUpdate` was given one. */
  liveUpdates?: LiveUpdateRedactor;
  /**
   * When the current turn's prompt was answered (`performance.now()`):
   * updates from then on are late, even those that arrive before the quiet
   * window starts.
   */
  answeredAt?: number;
  /** Whether the current turn's `session/prompt` is out, unanswered. */
  prompting?: boolean;
  /** The launched agent, once the location has started it. */
  transport?: AgentTransport;
  /** Tears down an agent whose launch outlived the run. */
  lateTeardown?: Promise<void>;
  /** The ACP connection, once made. */
  connection?: AgentConnection;
  /** What prompt content the agent accepts, from `initialize`. */
  promptCapabilities?: PromptCapabilities;
  /** Whether the agent advertised `sessionCapabilities.close`. */
  canCloseSession?: boolean;
  /** The session's advertised choices and values in force (`session.configured`). */
  sessionState?: SessionState;
  /** Open permission requests, when `permission-decision=ask`. */
  readonly permissions?: PermissionDesk;
  /** The run's client terminals (`client-terminals`), once the agent is connected. */
  terminals?: RunTerminals;
  /**
   * The real path of the session's directory (`sessionCwd`), the boundary of
   * `fs/*` and terminal cwds: taken before the agent starts, so an agent that
   * swaps that directory for a link cannot move the boundary (absent where
   * the directory is not on this machine).
   */
  realRoot?: string;
}

/** The run's client terminals, and their end. */
export interface RunTerminals extends TerminalHost {
  /** Kills every command of the run and waits until their groups are gone; no more start. */
  closeAll(): Promise<void>;
}

/** Sets up a run's state and starts its timeout. */
export function createRunContext(options: RunEngineOptions): RunContext {
  const { config } = options;
  const life = createRunLifecycle({
    runId: options.runId,
    conversationId: options.conversationId,
    timeoutSeconds: config.timeout,
    emit: options.emit,
    secrets: options.secrets ?? [],
    log: options.log ?? (() => {}),
  });
  let messageSequence = 0;
  const emitter = createDeltaCoalescer({
    next: life.emitter,
    windowMs: config.deltaCoalesceMs,
    secrets: life.secrets,
    nextMessageSequence: () => ++messageSequence,
  });
  const asks = config.permissionDecision === "ask" ||
    (config.permissionRulesJson ?? []).some((rule) => rule.decision === "ask");
  const askUnavailable = asks ? options.permissionAskUnavailable : undefined;
  if (askUnavailable) {
    emitter.emit("permission.unavailable", {
      reason: askUnavailable,
      fallback: config.permissionFallback,
    });
  }
  const permissions = asks && !askUnavailable
    ? createPermissionDesk({
      emit: emitter.emit,
      timeoutSeconds: config.permissionTimeout,
      fallback: config.permissionFallback,
      secrets: life.secrets,
    })
    : undefined;
  if (permissions) {
    life.abort.signal.addEventListener(
      "abort",
      () => permissions.cancelAll(),
      { once: true },
    );
  }
  return Object.assign(life, {
    permissions,
    options,
    config,
    emitter,
    replaying: false,
    replayedUpdates: 0,
    lastUpdateAt: 0,
    awaitingQuiet: false,
  });
}

/** Settles like `promise`, or rejects with the abort reason if the run is aborted first. */
export function untilAborted<T>(
  run: RunContext,
  promise: Promise<T>,
): Promise<T> {
  return Promise.race([promise, run.aborted]);
}
