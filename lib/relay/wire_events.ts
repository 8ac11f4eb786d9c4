/**
 * Run events on the relay wire, in the shapes LangBot's `RunnerResult`
 * validates (`lib/contracts/langbot_result.ts`) and `daemon.py` sends, and
 * back. Our daemon sends `timestamp` in whole epoch seconds, `finish_reason`
 * as LangBot's value, `daemon.py`'s code for failures it also reports, a tool
 * result as an object (or null), and only the `data` keys each payload model
 * allows. What that leaves out (milliseconds, the ACP stop reason, the
 * runner's code, tool kinds and locations, failure details) travels beside
 * the event as the frame's `runner` details, which Python hubs ignore. The
 * hub of `runner serve` takes events from either daemon and gives its callers
 * the runner's spellings. See `docs/relay.md`.
 *
 * @module
 */

import { langbotPayloadKeys } from "../contracts/langbot_result.ts";
import { ERROR_CODES } from "../errors.ts";
import { type RunEvent, usageFrom } from "../events.ts";

/** Runner codes whose failure `daemon.py` reports under another code. */
export const RELAY_CODES: Readonly<Record<string, string>> = {
  "acp.missing_binary": "acp.command_not_found",
  "run.timeout": "acp.daemon_timeout",
  "acp.initialize_timeout": "acp.daemon_timeout",
  "runner.internal": "acp.daemon_unexpected",
  "config.invalid": "acp.daemon_config_invalid",
};

/** `daemon.py`'s code for an empty prompt (ours: `config.invalid`). */
export const EMPTY_PROMPT_CODE = "acp.daemon_empty_prompt";

/** `daemon.py` codes → the runner's, for events without `runner_code`. */
const RUNNER_CODES: Readonly<Record<string, string>> = {
  "acp.command_not_found": "acp.missing_binary",
  "acp.daemon_timeout": "run.timeout",
  "acp.daemon_unexpected": "runner.internal",
  "acp.daemon_config_invalid": "config.invalid",
  [EMPTY_PROMPT_CODE]: "config.invalid",
};

/** ACP stop reasons → LangBot's `finish_reason` values. */
export const FINISH_REASONS: Readonly<Record<string, string>> = {
  end_turn: "stop",
  max_tokens: "length",
  max_turn_requests: "length",
  refusal: "content_filter",
  cancelled: "cancelled",
};

/** LangBot `finish_reason` → the ACP stop reason, when no `stop_reason` came. */
const STOP_REASONS: Readonly<Record<string, string>> = {
  stop: "end_turn",
  length: "max_tokens",
  content_filter: "refusal",
};

/** Below this a `timestamp` is in seconds (1e11 ms is 1973; 1e11 s is year 5138). */
const SECONDS_LIMIT = 1e11;

/** The runner's details of one wire event: what LangBot's model has no room for. */
export interface RunnerDetails {
  /** The event's time in milliseconds (the wire's `timestamp` is whole seconds). */
  timestamp_ms?: number;
  /** `data` keys as the runner spells them, where the wire's differ or lack them. */
  data?: Record<string, unknown>;
  /** The usage beside the token counters: context window (`used`, `size`) and `cost`. */
  usage?: Record<string, unknown>;
}

/** A run event as our daemon puts it on the wire. */
export interface RelayEvent {
  /** The event, valid as LangBot's `RunnerResult`. */
  event: RunEvent;
  /** The frame's `runner` details, when there are any. */
  runner?: RunnerDetails;
}

/** The relay code of a failure with `code` and `detail` (unchanged if none). */
export function relayCodeOf(code: string, detail: unknown): string {
  const input = (detail as { input?: unknown } | undefined)?.input;
  if (code === "config.invalid" && input === "empty") return EMPTY_PROMPT_CODE;
  return RELAY_CODES[code] ?? code;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** A tool's output as LangBot's `result` (an object, or null). */
function toolResultObject(value: unknown): Record<string, unknown> | null {
  if (value === undefined || value === null) return null;
  if (isPlainObject(value)) return value;
  if (typeof value === "string") return { text: value };
  return { content: value };
}

/** `data` in LangBot's spellings, with the runner's own values in `kept`. */
function wireData(
  type: string,
  data: Record<string, unknown>,
  kept: Record<string, unknown>,
): Record<string, unknown> {
  const wire: Record<string, unknown> = { ...data };
  const change = (key: string, value: unknown) => {
    if (value === wire[key]) return;
    if (key in data) kept[key] = data[key];
    wire[key] = value;
  };
  if (type === "run.completed" && typeof data.finish_reason === "string") {
    change(
      "finish_reason",
      FINISH_REASONS[data.finish_reason] ?? data.finish_reason,
    );
  } else if (type === "run.failed" && typeof data.code === "string") {
    change("code", relayCodeOf(data.code, data.detail));
  } else if (type === "tool.call.started") {
    const parameters = data.parameters;
    change(
      "parameters",
      parameters === undefined
        ? {}
        : isPlainObject(parameters)
        ? parameters
        : { input: parameters },
    );
  } else if (type === "tool.call.completed") {
    change("result", toolResultObject(data.result));
    const error = data.error;
    change(
      "error",
      error === undefined || error === null || typeof error === "string"
        ? error ?? null
        : JSON.stringify(error),
    );
  }
  const allowed = langbotPayloadKeys(type);
  if (allowed) {
    for (const key of Object.keys(wire)) {
      if (allowed.includes(key)) continue;
      kept[key] = wire[key];
      delete wire[key];
    }
  }
  return wire;
}

/** A run event as our daemon sends it to a hub: LangBot's shape plus the runner's details. */
export function toRelayEvent(event: RunEvent): RelayEvent {
  const wire: RunEvent = { ...event };
  const runner: RunnerDetails = {};
  if (typeof event.timestamp === "number") {
    wire.timestamp = Math.floor(event.timestamp / 1000);
    runner.timestamp_ms = event.timestamp;
  }
  const kept: Record<string, unknown> = {};
  wire.data = wireData(event.type, event.data ?? {}, kept);
  if (Object.keys(kept).length) runner.data = kept;
  delete wire.usage;
  const usage = usageFrom(event.usage);
  if (usage) {
    // LangBot's LLMTokenUsage takes counters: the tokens travel in it, the
    // window and the cost (a fraction, a currency) in the runner's details.
    const { used, size, cost, ...tokens } = usage;
    if (Object.keys(tokens).length) wire.usage = tokens;
    const beside = { used, size, cost };
    for (const key of ["used", "size", "cost"] as const) {
      if (beside[key] === undefined) delete beside[key];
    }
    if (Object.keys(beside).length) runner.usage = beside;
  }
  return Object.keys(runner).length ? { event: wire, runner } : { event: wire };
}

/**
 * A run event from any daemon (ours or `daemon.py`) in the runner's
 * spellings: `timestamp` in milliseconds, `finish_reason` the ACP stop
 * reason, `code` the runner's code (with `retryable` from the catalogue when
 * the daemon sent none), the runner's `data` keys put back from `runner`.
 * Codes without a runner equivalent stay as they are.
 */
export function fromRelayEvent(
  event: RunEvent,
  runner?: RunnerDetails,
): RunEvent {
  const local: RunEvent = { ...event };
  if (typeof runner?.timestamp_ms === "number") {
    local.timestamp = runner.timestamp_ms;
  } else if (
    typeof event.timestamp === "number" && event.timestamp < SECONDS_LIMIT
  ) {
    local.timestamp = Math.round(event.timestamp * 1000);
  }
  const kept = isPlainObject(runner?.data) ? runner.data : undefined;
  // Older runner daemons kept the stop reason and code inside data.
  const { stop_reason: stopReason, runner_code: runnerCode, ...data } =
    event.data ?? {};
  if (event.type === "tool.call.completed") {
    if (data.result === null) delete data.result;
    if (data.error === null) delete data.error;
  }
  if (kept) Object.assign(data, kept);
  if (event.type === "run.completed") {
    const finish = data.finish_reason;
    if (kept && "finish_reason" in kept) {
      // the runner's own stop reason came back with the details
    } else if (typeof stopReason === "string") data.finish_reason = stopReason;
    else if (typeof finish === "string" && finish in STOP_REASONS) {
      data.finish_reason = STOP_REASONS[finish];
    }
  } else if (event.type === "run.failed") {
    const relayCode = typeof data.code === "string" ? data.code : undefined;
    const code = kept && typeof kept.code === "string"
      ? kept.code
      : typeof runnerCode === "string"
      ? runnerCode
      : relayCode && (RUNNER_CODES[relayCode] ?? relayCode);
    if (code !== undefined) data.code = code;
    if (typeof data.retryable !== "boolean" && code && code in ERROR_CODES) {
      data.retryable = ERROR_CODES[code as keyof typeof ERROR_CODES].retryable;
    }
  }
  local.data = data;
  const usage = usageFrom({
    ...(isPlainObject(event.usage) ? event.usage : {}),
    ...(isPlainObject(runner?.usage) ? runner.usage : {}),
  });
  if (usage) local.usage = usage;
  else delete local.usage;
  return local;
}
