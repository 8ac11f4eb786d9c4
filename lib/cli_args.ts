/**
 * Shared CLI plumbing: run-config keys as `--flags`, and printing failures.
 *
 * @module
 */

import { RUN_CONFIG_KEYS } from "./config.ts";
import { RunnerError, toRunnerError } from "./errors.ts";

/** `parseArgs` options for every run-config key (all strings). */
export function configFlagOptions(): Record<string, { type: "string" }> {
  return Object.fromEntries(
    Object.keys(RUN_CONFIG_KEYS).map((
      key,
    ) => [key, { type: "string" as const }]),
  );
}

/** Picks the run-config keys out of parsed flag values. */
export function configFromFlags(
  values: Record<string, unknown>,
): Record<string, unknown> {
  const config: Record<string, unknown> = {};
  for (const key of Object.keys(RUN_CONFIG_KEYS)) {
    if (values[key] !== undefined) config[key] = values[key];
  }
  return config;
}

/** Prints a failure (code and message) to stderr and returns its exit code. */
export function reportFailure(error: unknown, exitCode = 2): number {
  const failure = toRunnerError(error);
  console.error(`error [${failure.code}]: ${failure.message}`);
  return failure instanceof RunnerError ? exitCode : 1;
}
