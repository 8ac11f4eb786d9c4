/**
 * Answers the agent's `session/request_permission` by the run's policy, and
 * answers pending requests `cancelled` when the run is cancelled.
 *
 * @module
 */

import type {
  RequestPermissionRequest,
  RequestPermissionResponse,
} from "@agentclientprotocol/sdk";
import type { EventEmitter } from "./events.ts";
import { choosePermission } from "../acp/permission_options.ts";
import type { PermissionOptionKind as PermissionKind } from "@agentclientprotocol/sdk";

const CANCELLED: RequestPermissionResponse = {
  outcome: { outcome: "cancelled" },
};

/** Options for {@linkcode answerPermission}. */
export interface AnswerPermissionOptions {
  /** The agent's request. */
  request: RequestPermissionRequest;
  /** The run's `permission-decision`. */
  wanted: PermissionKind;
  /** Whether the run is being cancelled (then every request is answered `cancelled`). */
  cancelled: boolean;
  /** Records the decision in the run's events. */
  emit: EventEmitter["emit"];
  /** The `permission-rules-json` rule that decided (index, or "default"). */
  rule?: number | "default";
}

/** Picks an option by policy and records the choice as `permission.decided`. */
export function answerPermission(
  options: AnswerPermissionOptions,
): Promise<RequestPermissionResponse> {
  const { request } = options;
  const toolCall = {
    request_id: crypto.randomUUID(),
    tool_call_id: request.toolCall?.toolCallId ?? null,
    title: request.toolCall?.title ?? null,
    ...(options.rule === undefined ? {} : { rule: options.rule }),
  };
  if (options.cancelled) {
    options.emit("permission.decided", {
      ...toolCall,
      outcome: "cancelled",
      decision: "cancelled",
      by: "cancel",
    });
    return Promise.resolve(CANCELLED);
  }
  const choice = choosePermission({
    options: request.options ?? [],
    wanted: options.wanted,
  });
  if ("cancelled" in choice) {
    options.emit("permission.decided", {
      ...toolCall,
      outcome: "cancelled",
      decision: "cancelled",
      by: "policy",
      reason: "the agent offered no options",
    });
    return Promise.resolve(CANCELLED);
  }
  options.emit("permission.decided", {
    ...toolCall,
    outcome: "selected",
    decision: choice.kind,
    by: "policy",
    option_id: choice.optionId,
    kind: choice.kind,
    wanted: options.wanted,
    exact: choice.exact,
    reason: choice.reason,
  });
  return Promise.resolve({
    outcome: { outcome: "selected", optionId: choice.optionId },
  });
}
