/**
 * What a caller reads when `runner serve`'s caller floor refuses its config:
 * `resolveCallerConfig`, run on every request, against an operator's
 * defaults.
 *
 * @module
 */

import assert from "node:assert/strict";
import { RunnerError } from "../lib/errors.ts";
import { resolveCallerConfig } from "../lib/server/policy.ts";

/** A refusal's code, the key it names and its message. */
export interface CallerRefusal {
  /** The error code (`http.forbidden`, `config.invalid`, …). */
  code: string;
  /** The key the refusal names (`detail.key`). */
  key: unknown;
  /** The message the caller reads. */
  message: string;
}

/**
 * The refusal a caller gets for `caller` under the operator's `operator`
 * defaults (provider `codex` in `workspace`), or undefined when accepted.
 */
export function callerRefusal(
  operator: Record<string, unknown>,
  caller: Record<string, unknown>,
  place: { workspace: string; dataDir?: string },
): CallerRefusal | undefined {
  try {
    resolveCallerConfig({
      allowCustomCommands: false,
      allowEnvNames: [],
      dataDir: place.dataDir,
      runDefaults: {
        provider: "codex",
        workspace: place.workspace,
        ...operator,
      },
    }, caller);
    return undefined;
  } catch (error) {
    assert.ok(error instanceof RunnerError, String(error));
    return {
      code: error.code,
      key: error.detail?.key,
      message: error.message,
    };
  }
}
