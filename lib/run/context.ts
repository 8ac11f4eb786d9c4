/**
 * The state one run's steps share: its options, events, steering queue,
 * abort signal, and what starting the agent has established so far.
 *
 * @module
 */

import type { PromptCapabilities } from "@agentclientprotocol/sdk";
import type { AgentConnection } from "../acp/client.ts";
import type { RunConfig } from "../config.ts";
import { RunnerError } from "../errors.ts";
import type { RunUsage } from "../events.ts";
import {
  createEventEmitter,
  type EventEmitter,
  type TurnState,
} from "./events.ts";
import type { RunInput } from "./prompt.ts";
import type { AgentTransport, RunEngineOptions } from "./types.ts";

/** One run's shared state; the engine's steps read and update it in place. */
export interface RunContext {
  /** The run's options. */
  readonly options: RunEngineOptions;
  /** The validated config (`options.config`). */
  readonly config: RunConfig;
  /** Values redacted from anything the run reports. */
  readonly secrets: string[];
  /** Structured log lines (never secrets). */
  readonly log: (entry: Record<string, unknown>) => void;
  /** Numbers the run's events and lets only one terminal event through. */
  readonly emitter: EventEmitter;
  /** Follow-ups waiting for the next turn. */
  readonly queue: RunInput[];
  /** Whether the run takes no more follow-ups. */
  closed: boolean;
  /** Aborted on cancel or timeout; its reason is the run's failure. */
  readonly abort: AbortController;
  /** Rejects with the abort reason once the run is aborted. */
  readonly aborted: Promise<never>;
  /** Aborts the run with `run.timeout` when it fires. */
  readonly runTimer: ReturnType<typeof setTimeout>;
  /** The assistant message of the open turn; undefined between turns. */
  turn?: TurnState;
  /**
   * Whether updates are dropped as `session/load` replay: from the load until
   * the replay has gone quiet and the first prompt is sent.
   */
  replaying: boolean;
  /** How many replayed updates were dropped. */
  replayedUpdates: number;
  /** Whether a permission request was answered reject or cancelled. */
  permissionRejected?: boolean;
  /** Usage the agent reported so far. */
  usage?: RunUsage;
  /** The last `msg_sequence` handed out. */
  messageSequence: number;
  /** When the agent last sent an update (`performance.now()`). */
  lastUpdateAt: number;
  /** The ACP session, once chosen. */
  sessionId?: string;
  /** The launched agent, once the location has started it. */
  transport?: AgentTransport;
  /** Tears down an agent whose launch outlived the run. */
  lateTeardown?: Promise<void>;
  /** The ACP connection, once made. */
  connection?: AgentConnection;
  /** What prompt content the agent accepts, from `initialize`. */
  promptCapabilities?: PromptCapabilities;
}

/** Sets up a run's state and starts its timeout. */
export function createRunContext(options: RunEngineOptions): RunContext {
  const { config } = options;
  const log = options.log ?? (() => {});
  const emitter = createEventEmitter({
    runId: options.runId,
    sink: options.emit,
    onDropped: (event) =>
      log({ msg: "event after terminal event dropped", type: event.type }),
  });
  const abort = new AbortController();
  const runTimer = setTimeout(() =>
    abort.abort(
      new RunnerError(
        "run.timeout",
        `The run exceeded its timeout of ${config.timeout} s. Raise timeout, or split the task.`,
      ),
    ), config.timeout * 1000);
  const aborted = new Promise<never>((_, reject) => {
    abort.signal.addEventListener("abort", () => reject(abort.signal.reason), {
      once: true,
    });
  });
  aborted.catch(() => {});
  return {
    options,
    config,
    secrets: options.secrets ?? [],
    log,
    emitter,
    queue: [],
    closed: false,
    abort,
    aborted,
    runTimer,
    replaying: false,
    replayedUpdates: 0,
    messageSequence: 0,
    lastUpdateAt: 0,
  };
}

/** Settles like `promise`, or rejects with the abort reason if the run is aborted first. */
export function untilAborted<T>(
  run: RunContext,
  promise: Promise<T>,
): Promise<T> {
  return Promise.race([promise, run.aborted]);
}
