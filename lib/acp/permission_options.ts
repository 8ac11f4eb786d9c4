/**
 * Headless answers to ACP `session/request_permission`: picks the offered
 * option that best matches the configured decision, never escalating a
 * wanted rejection into an approval.
 *
 * @module
 */

import type {
  PermissionOption,
  PermissionOptionKind,
} from "@agentclientprotocol/sdk";
import { RunnerError } from "../errors.ts";

/** Every permission option kind, safest first. */
export const PERMISSION_KINDS: readonly PermissionOptionKind[] = [
  "reject_once",
  "reject_always",
  "allow_once",
  "allow_always",
];

/** The decision used when none is configured. */
export const DEFAULT_PERMISSION_DECISION: PermissionOptionKind = "allow_once";

/** Options for {@linkcode choosePermission}. */
export interface ChoosePermissionOptions {
  /** The options the agent offered, in its order. */
  options: readonly PermissionOption[];
  /** The configured decision. */
  wanted: PermissionOptionKind;
}

/** The option to answer with. */
export interface ChosenPermission {
  /** The chosen option's id. */
  optionId: string;
  /** The chosen option's kind. */
  kind: PermissionOptionKind;
  /** Whether the kind is exactly the wanted one. */
  exact: boolean;
  /** Why this option was chosen (for logs and events). */
  reason: string;
}

/** No option fits: answer the request with outcome `cancelled`. */
export interface CancelledPermission {
  /** Always true. */
  cancelled: true;
  /** Why no option was chosen. */
  reason: string;
}

/**
 * Picks the option to answer a permission request with: the wanted kind if
 * offered; else the other kind of the same family (allow_once ↔
 * allow_always, reject_once ↔ reject_always); else the safest offered kind.
 *
 * Returns `cancelled` when nothing is offered, and when a rejection is wanted
 * but only approvals are offered: a wanted rejection never becomes an approval.
 * Options of kinds this runner does not know are ignored.
 */
export function choosePermission(
  options: ChoosePermissionOptions,
): ChosenPermission | CancelledPermission {
  const { wanted } = options;
  const offered = (options.options ?? []).filter((option) =>
    PERMISSION_KINDS.includes(option?.kind)
  );
  const first = (kind: PermissionOptionKind) =>
    offered.find((option) => option.kind === kind);
  const chosen = (
    option: PermissionOption,
    reason: string,
  ): ChosenPermission => ({
    optionId: option.optionId,
    kind: option.kind,
    exact: option.kind === wanted,
    reason,
  });

  if (offered.length === 0) {
    return {
      cancelled: true,
      reason: "the agent offered no permission option this runner knows",
    };
  }
  const exact = first(wanted);
  if (exact) return chosen(exact, `"${wanted}" was offered`);

  const sibling = first(siblingKind(wanted));
  if (sibling) {
    return chosen(
      sibling,
      `"${wanted}" was not offered; chose "${sibling.kind}" of the same family`,
    );
  }
  if (wanted.startsWith("reject")) {
    return {
      cancelled: true,
      reason:
        `"${wanted}" was wanted but the agent offered no reject option; answered cancelled rather than allow`,
    };
  }
  const safest = PERMISSION_KINDS.map(first).find((option) => option)!;
  return chosen(
    safest,
    `no allow option was offered; chose the safest offered, "${safest.kind}"`,
  );
}

/** Options for {@linkcode parsePermissionDecision}. */
export interface ParsePermissionDecisionOptions {
  /** Whether `ask` (a person answers) is accepted. */
  allowAsk?: boolean;
  /** The config key named in errors. */
  key?: string;
  /** What absent means. */
  fallback?: PermissionOptionKind;
}

/**
 * Validates a configured permission decision. Accepts the four ACP kinds
 * (and `ask` when allowed), case-insensitively and with `-` for `_`; absent
 * (`undefined`, `null`, `""`) means the fallback, by default
 * {@linkcode DEFAULT_PERMISSION_DECISION}. Throws `config.invalid`.
 */
export function parsePermissionDecision(
  value: unknown,
  options: ParsePermissionDecisionOptions = {},
): PermissionOptionKind | "ask" {
  if (value === undefined || value === null || value === "") {
    return options.fallback ?? DEFAULT_PERMISSION_DECISION;
  }
  const normalised = typeof value === "string"
    ? value.trim().toLowerCase().replaceAll("-", "_")
    : undefined;
  if (options.allowAsk && normalised === "ask") return "ask";
  const kind = PERMISSION_KINDS.find((known) => known === normalised);
  if (kind) return kind;
  const shown = typeof value === "string"
    ? JSON.stringify(value.slice(0, 40))
    : Array.isArray(value)
    ? "an array"
    : typeof value === "object"
    ? "an object"
    : `a ${typeof value}`;
  throw new RunnerError(
    "config.invalid",
    `${options.key ?? "permission-decision"} must be one of ${
      options.allowAsk ? "ask, " : ""
    }allow_once, allow_always, reject_once or reject_always (got ${shown}).`,
  );
}

function siblingKind(kind: PermissionOptionKind): PermissionOptionKind {
  const siblings: Record<PermissionOptionKind, PermissionOptionKind> = {
    allow_once: "allow_always",
    allow_always: "allow_once",
    reject_once: "reject_always",
    reject_always: "reject_once",
  };
  return siblings[kind];
}
