/**
 * The data of a run's `run.failed` event: code, message, retryability, the
 * agent's stderr tail where it explains the failure, and the follow-ups the
 * run could not answer.
 *
 * @module
 */

import { type RunnerError, toRunnerError } from "../errors.ts";
import type { RunEvent } from "../events.ts";
import type { RunInput } from "./prompt.ts";
import { redactSecrets } from "../secrets.ts";

const EXPLAINED_BY_STDERR = new Set([
  "acp.process_exited",
  "acp.initialize_timeout",
  "acp.start_timeout",
]);

/** Options for {@linkcode failureEventData}. */
export interface FailureEventOptions {
  /** The failure. */
  failure: RunnerError;
  /** The agent's (already redacted) stderr tail, if an agent started. */
  stderrTail?: string;
  /** Follow-ups still queued when the run ended. */
  unprocessed: RunInput[];
  /** Values to redact. */
  secrets: readonly string[];
}

/** Builds `run.failed` data. */
export function failureEventData(
  options: FailureEventOptions,
): Record<string, unknown> {
  const { failure, secrets } = options;
  const data: Record<string, unknown> = {
    error: redactSecrets(failure.message, secrets),
    code: failure.code,
    retryable: failure.retryable,
  };
  const tail = options.stderrTail?.trim();
  if (tail && failure.code !== "run.cancelled") {
    data.stderr_tail = tail.slice(-4096);
    if (EXPLAINED_BY_STDERR.has(failure.code)) {
      data.error += `\nAgent stderr (last lines):\n${
        tail.split("\n").slice(-12).join("\n")
      }`;
    }
  } else if (
    options.stderrTail !== undefined && failure.code === "acp.process_exited"
  ) {
    data.error += " The agent wrote nothing to stderr.";
  }
  if (failure.detail) data.detail = failure.detail;
  if (options.unprocessed.length) {
    // Follow-ups the run could not answer go back to the caller, never lost.
    data.unprocessed_inputs = handedBackInputs(options.unprocessed, secrets);
  }
  return data;
}

/** `run.failed`'s `unprocessed_inputs`: the follow-ups' text, redacted. */
export function handedBackInputs(
  unprocessed: readonly RunInput[],
  secrets: readonly string[],
): { text: string }[] {
  return unprocessed.map((input) => ({
    text: redactSecrets(input.text ?? "", secrets),
  }));
}

/**
 * The only event of a run that failed before the engine took it over (its
 * message holds no env values: it comes from validation or the location).
 */
export function failedBeforeStartEvent(
  runId: string | undefined,
  error: unknown,
): RunEvent {
  const failure = toRunnerError(error);
  return {
    run_id: runId ?? "",
    type: "run.failed",
    data: {
      error: failure.message,
      code: failure.code,
      retryable: failure.retryable,
      ...(failure.detail ? { detail: failure.detail } : {}),
    },
    sequence: 1,
    timestamp: Date.now(),
  };
}
