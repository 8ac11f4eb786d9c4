/**
 * Run events: the shapes of coding-relay-v1's `RunnerResult`, shared by the
 * CLI, the HTTP API and the daemon relay. See `docs/events.md`.
 *
 * @module
 */

/** Token usage reported by the agent (`usage_update`). */
export interface RunUsage {
  /** Tokens in context. */
  used?: number;
  /** Context window size. */
  size?: number;
  /** Cost, when the agent reports it. */
  cost?: { amount: number; currency: string } | null;
}

/** One run event, as streamed to callers and stored in the event log. */
export interface RunEvent {
  /** The run this event belongs to. */
  run_id: string;
  /** The event type (`message.delta`, `run.completed`, …). */
  type: string;
  /** The type's payload. */
  data: Record<string, unknown>;
  /** Usage, on `run.completed`. */
  usage?: RunUsage;
  /** Position in the run's event stream, from 1. */
  sequence?: number;
  /** Milliseconds since the epoch. */
  timestamp?: number;
}

/** Event types that end a run; exactly one is emitted per run. */
export const TERMINAL_EVENT_TYPES: ReadonlySet<string> = new Set([
  "run.completed",
  "run.failed",
]);

/** Whether `event` ends its run. */
export function isTerminalEvent(event: Pick<RunEvent, "type">): boolean {
  return TERMINAL_EVENT_TYPES.has(event.type);
}

/** Receives a run's events in order. */
export type EventSink = (event: RunEvent) => void;

/** Every run event type, in the order of `docs/events.md`'s table. */
export const RUN_EVENT_TYPES: readonly string[] = [
  "message.delta",
  "message.completed",
  "thought.delta",
  "tool.call.started",
  "tool.call.updated",
  "tool.call.completed",
  "plan.updated",
  "usage.updated",
  "permission.decided",
  "agent.update",
  "state.updated",
  "session.reset",
  "run.completed",
  "run.failed",
];
