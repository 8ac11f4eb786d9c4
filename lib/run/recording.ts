/**
 * Recording one run's events: redacted, stored (with the session mapping and
 * the run's outcome), then handed to the live listeners — as the engine (or
 * the hub, for a daemon's run) made them: deltas without `all_content`,
 * completions with their whole text (`docs/events.md`, "Lean and full
 * forms"). Listeners get an event only once its batch is committed (durable
 * before visible), in order, so whatever a reader saw survives a crash; while
 * the store cannot write, events are withheld until it can. A run records one
 * terminal event; when storing its outcome fails (a full disk), the final
 * write is retried until the store takes it. In a fleet (a store that
 * fences), the terminal event reaches listeners only once the store took the
 * run's end; a run the store fenced (this replica lost its lease) ends for its
 * listeners with one `runner.replica_lost` failure instead, whatever the agent
 * did next.
 *
 * @module
 */

import { ERROR_CODES, toRunnerError } from "../errors.ts";
import type { RunEvent, UsageCost } from "../events.ts";
import { costSince, isTerminalEvent } from "../events.ts";
import { redactDeep } from "../secrets.ts";
import type { RunStore, SessionKey } from "../store/types.ts";
import { SESSION_SETTINGS_KEY, sessionSettingsFrom } from "./session_memory.ts";

/** Options for {@linkcode createRunRecorder}. */
export interface RunRecorderOptions {
  /** The store (events, sessions, run outcomes). */
  store: RunStore;
  /** The run whose events are recorded. */
  runId: string;
  /**
   * Where `external.acp_session_id` and `external.acp_session_config`
   * updates are stored, if anywhere.
   */
  sessionKey?: SessionKey;
  /**
   * The stored session the run may continue and its running cost as last
   * reported: the run's cost is what it adds to that (`costSince`).
   */
  sessionCost?: { sessionId: string; cost?: UsageCost };
  /** Values to redact from every event. */
  secrets: readonly string[];
  /** Structured log. */
  log: (entry: Record<string, unknown>) => void;
  /** The first wait before the final write is retried, in ms (doubles up to 5 s). */
  finishRetryMs?: number;
}

const MAX_FINISH_RETRY_MS = 5_000;

/** Records one run's events and fans them out to listeners. */
export interface RunRecorder {
  /** Redacts and stores an event, and delivers it to every listener once it is durable. */
  emit(event: RunEvent): void;
  /**
   * Subscribes to events emitted from now on and, until
   * {@linkcode RunRecorder.stopReplay}, first hands over those emitted before.
   */
  subscribe(listener: (event: RunEvent) => void): () => void;
  /** Ends the replay of early events to new subscribers. */
  stopReplay(): void;
  /**
   * Resolves once every event emitted so far is delivered (so stored) and the
   * other store writes (session id, outcome) have settled.
   */
  settled(): Promise<void>;
}

/** Makes the recorder of one run. */
export function createRunRecorder(options: RunRecorderOptions): RunRecorder {
  const { runId, log } = options;
  const listeners = new Set<(event: RunEvent) => void>();
  let writes = Promise.resolve();
  // Events emitted before the starter could subscribe (a launch failing at once).
  let early: RunEvent[] | undefined = [];
  let terminal: RunEvent | undefined;
  let lastSequence = 0;
  let deliveredTerminal = false;
  const deliver = (event: RunEvent) => {
    if (deliveredTerminal) return; // nothing follows the terminal event
    if (isTerminalEvent(event)) deliveredTerminal = true;
    lastSequence = event.sequence ?? lastSequence;
    early?.push(event);
    deliverTo(listeners, event, options);
  };
  const publisher = createDurablePublisher(options, deliver);
  const sessionWrites: SessionWrites = { last: Promise.resolve() };
  const costWrites: Promise<unknown>[] = [];
  const runCost = sessionCostTracker(options, sessionWrites, costWrites);
  // Fencing: the terminal event waits for the store's verdict on the run's
  // end, then follows the events before it; a lost lease's failure is not
  // stored, so it goes to the listeners at once.
  const fence: FencedTerminal = fencedTerminal(
    options,
    (event) => fence.lost ? deliver(event) : publisher.publish(event),
    () => lastSequence,
  );
  return {
    emit(raw) {
      if (fence.lost) return; // the run already ended for its listeners
      if (terminal) {
        log({
          msg: "event after the terminal event dropped",
          level: "error",
          run_id: runId,
          type: raw.type,
        });
        return;
      }
      const event = runCost(redactDeep(raw, options.secrets));
      if (isTerminalEvent(event)) terminal = event;
      const { stored, taken } = storeTracked(options, event, {
        terminal: terminal === event,
        fence,
        sessionWrites,
      });
      writes = writes.then(() => stored);
      if (terminal === event && fence.holds) {
        fence.hold(event);
        writes = writes.then(() => fence.settled);
        return;
      }
      // Never stored, so never shown: a client sees only what survives.
      if (taken) publisher.publish(event);
    },
    subscribe(listener) {
      for (const event of early ?? []) listener(event);
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    stopReplay() {
      early = undefined;
    },
    settled: () =>
      Promise.all([writes, publisher.idle(), ...costWrites]).then(() => {}),
  };
}

/**
 * Starts storing `event` (and a terminal event's outcome); a failure is
 * logged, and for the terminal event retried, or ends the run as lost when
 * the store fenced it. `stored` resolves once the writes settled; `taken`
 * says whether the store took the event at all (a closed store refuses it).
 */
function storeTracked(
  options: RunRecorderOptions,
  event: RunEvent,
  { terminal, fence, sessionWrites }: {
    terminal: boolean;
    fence: FencedTerminal;
    sessionWrites: SessionWrites;
  },
): { stored: Promise<void>; taken: boolean } {
  const logFailure = (error: unknown) => {
    options.log({
      msg: "storing a run event failed",
      level: "error",
      run_id: options.runId,
      type: event.type,
      code: toRunnerError(error).code,
      error: toRunnerError(error).message,
    });
    if (!terminal) return;
    if (toRunnerError(error).code === "runner.replica_lost") {
      fence.lose();
    } else retryFinish(options, event, () => fence.release(event));
  };
  try {
    const stored = Promise.all(storeEvent(options, event, sessionWrites)).then(
      () => {
        if (terminal) fence.release(event);
      },
      logFailure,
    );
    return { stored, taken: true };
  } catch (error) {
    logFailure(error);
    return { stored: Promise.resolve(), taken: false };
  }
}

/** Hands events to `deliver` in order, each once the store has committed it. */
interface DurablePublisher {
  /** Delivers `event` once it (and every event before it) is durable. */
  publish(event: RunEvent): void;
  /** Resolves once every event published so far is delivered (or given up). */
  idle(): Promise<void>;
}

/**
 * Waits for the store's commits on behalf of one run: one wait at a time,
 * covering every event queued when it began (a group commit takes them all,
 * so the next wait usually resolves at once).
 */
function createDurablePublisher(
  { store, runId, log }: RunRecorderOptions,
  deliver: (event: RunEvent) => void,
): DurablePublisher {
  const waiting: RunEvent[] = [];
  let busy = false;
  let idle = Promise.withResolvers<void>();
  idle.resolve();
  const wait = () => {
    busy = true;
    const count = waiting.length;
    const next = () => {
      busy = false;
      if (waiting.length) wait();
      else idle.resolve();
    };
    store.durable().then(() => {
      for (const event of waiting.splice(0, count)) deliver(event);
      next();
    }, (error) => {
      // The store closed with them unwritten: nobody ever sees them.
      const failure = toRunnerError(error);
      log({
        msg: "run events were never stored, so never shown",
        level: "error",
        run_id: runId,
        events: waiting.splice(0, count).length,
        code: failure.code,
        error: failure.message,
      });
      next();
    });
  };
  return {
    publish(event) {
      if (!busy && !waiting.length) idle = Promise.withResolvers<void>();
      waiting.push(event);
      if (!busy) wait();
    },
    idle: () => idle.promise,
  };
}

/** Hands an event to every listener; one that throws is logged, not fatal. */
function deliverTo(
  listeners: Set<(event: RunEvent) => void>,
  event: RunEvent,
  { runId, log }: RunRecorderOptions,
): void {
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
}

/**
 * Follows which agent session the run uses and, on its terminal event,
 * replaces the agent's running cost with what the run added to it and
 * remembers the running cost with the session.
 */
function sessionCostTracker(
  options: RunRecorderOptions,
  sessionWrites: SessionWrites,
  writes: Promise<unknown>[],
): (event: RunEvent) => RunEvent {
  const { store, log, runId } = options;
  // Read when used: a run that installs its agent first learns its session later.
  let sessionId: string | undefined;
  let known = false;
  return (event) => {
    const { sessionKey, sessionCost } = options;
    if (!known && sessionCost) {
      sessionId = sessionCost.sessionId;
      known = true;
    }
    if (
      event.type === "state.updated" &&
      event.data.key === "external.acp_session_id"
    ) {
      sessionId = String(event.data.value);
    }
    const total = event.usage?.cost;
    if (!isTerminalEvent(event) || !total) return event;
    const before = sessionId === sessionCost?.sessionId
      ? sessionCost?.cost
      : undefined;
    if (sessionKey && sessionId) {
      const write = { sessionId, cost: total };
      // Lost, the session's next run counts from the total stored before.
      writes.push(
        inTurn(sessionWrites, () => store.putSessionCost(sessionKey, write))
          .catch((error) =>
            log({
              msg: "storing the session's cost failed",
              level: "error",
              run_id: runId,
              code: toRunnerError(error).code,
            })
          ),
      );
    }
    return {
      ...event,
      usage: { ...event.usage, cost: costSince(total, before) },
    };
  };
}

/**
 * The run's writes to its conversation's session row, one after the other: a
 * store may run writes concurrently, and the remembered values of a new
 * session must land after the row its id made.
 */
interface SessionWrites {
  last: Promise<unknown>;
}

/**
 * Queues the event and starts storing a new agent session id, the session
 * config values the conversation remembers, and the outcome of a terminal
 * event; returns those writes.
 */
function storeEvent(
  { store, runId, sessionKey }: RunRecorderOptions,
  event: RunEvent,
  sessionWrites: SessionWrites,
): Promise<unknown>[] {
  const writes: Promise<unknown>[] = [];
  store.appendEvent(runId, event);
  const key = event.type === "state.updated" ? event.data.key : undefined;
  if (sessionKey && key === "external.acp_session_id") {
    const sessionId = String(event.data.value);
    writes.push(
      inTurn(sessionWrites, () => store.putSession(sessionKey, sessionId)),
    );
  } else if (sessionKey && key === SESSION_SETTINGS_KEY) {
    const settings = { ...sessionSettingsFrom(event.data.value) };
    writes.push(
      inTurn(
        sessionWrites,
        () => store.putSessionSettings(sessionKey, settings),
      ),
    );
  }
  if (isTerminalEvent(event)) writes.push(finishInStore(store, runId, event));
  return writes;
}

/** Starts `write` once the session writes before it settled. */
function inTurn(
  writes: SessionWrites,
  write: () => Promise<unknown>,
): Promise<unknown> {
  const next = writes.last.then(write, write);
  writes.last = next.catch(() => {});
  return next;
}

/** Writes the queued events and the run's outcome (the final flush). */
async function finishInStore(
  store: RunStore,
  runId: string,
  event: RunEvent,
): Promise<void> {
  await store.finishRun(runId, {
    status: event.type === "run.completed"
      ? "completed"
      : event.data.code === "run.cancelled"
      ? "cancelled"
      : "failed",
    code: event.data.code as string | undefined,
    error: event.data.error as string | undefined,
    usage: event.usage,
  });
  await store.flush();
}

/** The terminal event of a run in a fencing store, held until the store's verdict. */
interface FencedTerminal {
  /** Whether terminal events wait for the store (the store fences). */
  readonly holds: boolean;
  /** Whether the run ended for its listeners as lost (fenced). */
  readonly lost: boolean;
  /** Resolves once the terminal event (or the lost one) was delivered. */
  readonly settled: Promise<void>;
  /** Holds the run's terminal event. */
  hold(event: RunEvent): void;
  /** The store took the run's end: delivers the held event. */
  release(event: RunEvent): void;
  /** The store fenced the run: delivers one `runner.replica_lost` failure. */
  lose(): void;
}

function fencedTerminal(
  { store, runId }: RunRecorderOptions,
  deliver: (event: RunEvent) => void,
  lastSequence: () => number,
): FencedTerminal {
  const settled = Promise.withResolvers<void>();
  let held: RunEvent | undefined;
  let done = false;
  let lost = false;
  const finish = (event: RunEvent) => {
    if (done) return;
    done = true;
    unwatch?.();
    deliver(event);
    settled.resolve();
  };
  const lose = () => {
    lost = true;
    finish({
      run_id: runId,
      type: "run.failed",
      data: {
        error:
          "This replica lost its fleet lease (it was paused or cut off from the database) while the run was active, so the fleet ended the run; start it again (any replica can take it).",
        code: "runner.replica_lost",
        retryable: ERROR_CODES["runner.replica_lost"].retryable,
      },
      sequence: held?.sequence ?? lastSequence() + 1,
      timestamp: Date.now(),
    });
  };
  const unwatch = store.watchFence?.(runId, lose);
  return {
    holds: unwatch !== undefined,
    get lost() {
      return lost;
    },
    settled: settled.promise,
    hold(event) {
      held = event;
    },
    release(event) {
      if (held === event) finish(event);
    },
    lose,
  };
}

/**
 * Retries the final flush (events and outcome) with growing waits until the
 * store takes it, or fails other than by being unavailable (e.g. closed).
 */
function retryFinish(
  options: RunRecorderOptions,
  event: RunEvent,
  onStored: () => void,
): void {
  const { store, runId, log } = options;
  let waitMs = options.finishRetryMs ?? 250;
  const attempt = async () => {
    try {
      await finishInStore(store, runId, event);
      log({ msg: "run outcome stored after retrying", run_id: runId });
      onStored();
    } catch (error) {
      const failure = toRunnerError(error);
      log({
        msg: "storing the run outcome failed",
        level: "error",
        run_id: runId,
        code: failure.code,
        error: failure.message,
        retry: failure.code === "store.unavailable",
      });
      if (failure.code !== "store.unavailable") return onStored();
      waitMs = Math.min(waitMs * 2, MAX_FINISH_RETRY_MS);
      setTimeout(attempt, waitMs);
    }
  };
  setTimeout(attempt, waitMs);
}
