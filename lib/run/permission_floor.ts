/**
 * The operator's permission policy as a floor: a caller's per-run
 * `permission-*` keys may make it stricter, never looser (`docs/http-api.md`,
 * "What a caller may set").
 *
 * @module
 */

import type { RunConfig } from "../config.ts";
import { ruleDecision } from "./permission_rules.ts";
import { RunnerError } from "../errors.ts";

/** Decisions from the loosest to the strictest. */
const DECISION_ORDER = [
  "allow_always",
  "allow_once",
  "ask",
  "reject_once",
  "reject_always",
] as const;

function rank(decision: string): number {
  return DECISION_ORDER.indexOf(decision as typeof DECISION_ORDER[number]);
}

function isApproval(decision: string): boolean {
  return decision.startsWith("allow");
}

function looser(key: string, message: string): RunnerError {
  return new RunnerError(
    "http.forbidden",
    `${key}: ${message} A caller may only make the operator's permission policy stricter; the operator sets it with runner serve --${key}.`,
    { detail: { key } },
  );
}

/** What {@linkcode checkPermissionFloor} compares. */
export interface PermissionFloorInput {
  /** The operator's run defaults, parsed (built-in defaults included). */
  operator: RunConfig;
  /** The run config after the caller's keys were merged in. */
  resolved: RunConfig;
  /** The caller's normalized (kebab-case) keys. */
  caller: Record<string, unknown>;
}

/**
 * Refuses a caller's permission keys that loosen the operator's policy: a
 * decision or fallback that approves more readily, or a shorter
 * `permission-timeout` while the fallback is an approval (it would approve
 * sooner), and caller rules where the operator has rules of its own or
 * whose decision is looser than the operator's `permission-decision`.
 *
 * @throws {RunnerError} `http.forbidden` naming the key.
 */
export function checkPermissionFloor(input: PermissionFloorInput): void {
  const { operator, resolved, caller } = input;
  if (
    caller["permission-decision"] !== undefined &&
    rank(resolved.permissionDecision) < rank(operator.permissionDecision)
  ) {
    throw looser(
      "permission-decision",
      `${resolved.permissionDecision} is looser than the server's ${operator.permissionDecision}.`,
    );
  }
  if (
    caller["permission-fallback"] !== undefined &&
    rank(resolved.permissionFallback) < rank(operator.permissionFallback)
  ) {
    throw looser(
      "permission-fallback",
      `${resolved.permissionFallback} is looser than the server's ${operator.permissionFallback}.`,
    );
  }
  if (caller["permission-rules-json"] !== undefined) checkRules(input);
  if (
    caller["permission-timeout"] !== undefined &&
    isApproval(resolved.permissionFallback) &&
    resolved.permissionTimeout < operator.permissionTimeout
  ) {
    throw looser(
      "permission-timeout",
      `${resolved.permissionTimeout} s would approve sooner than the server's ${operator.permissionTimeout} s (the fallback is ${resolved.permissionFallback}).`,
    );
  }
}

function checkRules({ operator, resolved }: PermissionFloorInput): void {
  if (operator.permissionRulesJson.length) {
    throw looser(
      "permission-rules-json",
      "the server has permission rules of its own; a caller cannot replace them.",
    );
  }
  const floor = rank(operator.permissionDecision);
  const index = resolved.permissionRulesJson.findIndex((rule) =>
    rank(ruleDecision(rule.decision)) < floor
  );
  if (index >= 0) {
    throw looser(
      "permission-rules-json",
      `rule ${index} decides ${
        resolved.permissionRulesJson[index].decision
      }, looser than the server's ${operator.permissionDecision}.`,
    );
  }
}
