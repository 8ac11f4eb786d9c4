/**
 * Run events on the relay wire, in the spellings LangBot's runner results and
 * `daemon.py` use, and back. Our daemon sends `timestamp` in epoch seconds,
 * `finish_reason` as LangBot's value (the ACP stop reason kept as
 * `stop_reason`) and, for failures `daemon.py` also reports, `daemon.py`'s
 * code (ours kept as `runner_code`). The hub of `runner serve` takes events
 * from either daemon and gives its callers the runner's spellings
 * (milliseconds, ACP stop reasons, runner codes). See `docs/relay.md`.
 *
 * @module
 */

import { ERROR_CODES } from "../errors.ts";
import type { RunEvent } from "../events.ts";

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

/** The relay code of a failure with `code` and `detail` (unchanged if none). */
export function relayCodeOf(code: string, detail: unknown): string {
  const input = (detail as { input?: unknown } | undefined)?.input;
  if (code === "config.invalid" && input === "empty") return EMPTY_PROMPT_CODE;
  return RELAY_CODES[code] ?? code;
}

/** A run event as our daemon sends it to a hub. */
export function toRelayEvent(event: RunEvent): RunEvent {
  const wire: RunEvent = { ...event };
  if (typeof event.timestamp === "number") {
    wire.timestamp = event.timestamp / 1000;
  }
  const data = event.data;
  if (
    event.type === "run.completed" && typeof data.finish_reason === "string"
  ) {
    const finish = FINISH_REASONS[data.finish_reason];
    if (finish !== undefined) {
      wire.data = {
        ...data,
        finish_reason: finish,
        stop_reason: data.finish_reason,
      };
    }
  }
  if (event.type === "run.failed" && typeof data.code === "string") {
    const code = relayCodeOf(data.code, data.detail);
    if (code !== data.code) {
      wire.data = { ...data, code, runner_code: data.code };
    }
  }
  return wire;
}

/**
 * A run event from any daemon (ours or `daemon.py`) in the runner's
 * spellings: `timestamp` in milliseconds, `finish_reason` the ACP stop
 * reason, `code` the runner's code (with `retryable` from the catalogue when
 * the daemon sent none). Codes without a runner equivalent stay as they are.
 */
export function fromRelayEvent(event: RunEvent): RunEvent {
  const local: RunEvent = { ...event };
  if (typeof event.timestamp === "number" && event.timestamp < SECONDS_LIMIT) {
    local.timestamp = Math.round(event.timestamp * 1000);
  }
  const { stop_reason: stopReason, runner_code: runnerCode, ...data } =
    event.data ?? {};
  if (event.type === "run.completed") {
    const finish = data.finish_reason;
    if (typeof stopReason === "string") data.finish_reason = stopReason;
    else if (typeof finish === "string" && finish in STOP_REASONS) {
      data.finish_reason = STOP_REASONS[finish];
    }
    local.data = data;
  } else if (event.type === "run.failed") {
    const relayCode = typeof data.code === "string" ? data.code : undefined;
    const code = typeof runnerCode === "string"
      ? runnerCode
      : relayCode && (RUNNER_CODES[relayCode] ?? relayCode);
    if (code !== undefined) data.code = code;
    if (typeof data.retryable !== "boolean" && code && code in ERROR_CODES) {
      data.retryable = ERROR_CODES[code as keyof typeof ERROR_CODES].retryable;
    }
    local.data = data;
  }
  return local;
}
