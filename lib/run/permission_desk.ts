/**
 * Interactive approvals (`permission-decision=ask`): each agent permission
 * request becomes a `permission.requested` event and waits for a person's
 * answer, the `permission-timeout` (then `permission-fallback`), or the
 * run's cancel. Every request ends with exactly one `permission.decided`.
 * See `docs/runs.md`, "Interactive approvals".
 *
 * @module
 */

import type {
  PermissionOptionKind,
  RequestPermissionRequest,
  RequestPermissionResponse,
} from "@agentclientprotocol/sdk";
import {
  choosePermission,
  PERMISSION_KINDS,
} from "../acp/permission_options.ts";
import { RunnerError } from "../errors.ts";
import { redactDeep } from "../secrets.ts";
import type { EventEmitter } from "./events.ts";

/** A person's answer: one offered option, or a decision kind. */
export type PermissionAnswer =
  | { option_id: string }
  | { decision: PermissionOptionKind };

/** What became of an answer handed to {@linkcode PermissionDesk.answer}. */
export type AnswerOutcome = "answered" | "unknown" | "already_answered";

/** Who decided a request. */
export type DecidedBy = "caller" | "timeout" | "cancel" | "policy";

/** The open permission requests of one run. */
export interface PermissionDesk {
  /** Emits `permission.requested` and waits for an answer, the timeout or cancel. */
  ask(
    request: RequestPermissionRequest,
    rule?: number | "default",
  ): Promise<RequestPermissionResponse>;
  /**
   * Answers an open request. Throws `http.bad_request` for an option the
   * agent did not offer or a decision that is not a permission kind.
   */
  answer(requestId: string, answer: PermissionAnswer): AnswerOutcome;
  /** Ids of the requests still waiting. */
  pending(): string[];
  /** Answers every open request `cancelled` (the run is being cancelled). */
  cancelAll(): void;
}

/** Options for {@linkcode createPermissionDesk}. */
export interface PermissionDeskOptions {
  /** Records `permission.requested` and `permission.decided`. */
  emit: EventEmitter["emit"];
  /** How long a request waits for a person, in seconds. */
  timeoutSeconds: number;
  /** The decision used when nobody answers in time. */
  fallback: PermissionOptionKind;
  /** Called when a request opens (e.g. the CLI asks on its terminal). */
  onRequest?: (requestId: string) => void;
  /** Values redacted from the tool call's input before it is summarised. */
  secrets?: readonly string[];
}

interface OpenRequest {
  request: RequestPermissionRequest;
  settle(response: RequestPermissionResponse, decided: Decision): void;
}

interface Decision {
  by: DecidedBy;
  decision: PermissionOptionKind | "cancelled";
  optionId?: string;
  reason?: string;
}

const CANCELLED: RequestPermissionResponse = {
  outcome: { outcome: "cancelled" },
};

/** Makes the permission desk of one run. */
export function createPermissionDesk(
  options: PermissionDeskOptions,
): PermissionDesk {
  const open = new Map<string, OpenRequest>();
  const answered = new Set<string>();
  return {
    ask(request, rule) {
      const requestId = crypto.randomUUID();
      // The permission-rules-json rule that sent it to a person, if any.
      const tag = rule === undefined ? {} : { rule };
      return new Promise((resolve) => {
        const expiresAt = Date.now() + options.timeoutSeconds * 1000;
        const timer = setTimeout(
          () =>
            decideByPolicy({
              entry: open.get(requestId),
              wanted: options.fallback,
              by: "timeout",
            }),
          options.timeoutSeconds * 1000,
        );
        open.set(requestId, {
          request,
          settle(response, decided) {
            clearTimeout(timer);
            open.delete(requestId);
            answered.add(requestId);
            options.emit("permission.decided", {
              ...decidedData(requestId, request, decided),
              ...tag,
            });
            resolve(response);
          },
        });
        options.emit("permission.requested", {
          ...requestedData(requestId, request, {
            expiresAt,
            secrets: options.secrets ?? [],
          }),
          ...tag,
        });
        options.onRequest?.(requestId);
      });
    },
    answer(requestId, answer) {
      const entry = open.get(requestId);
      if (!entry) {
        return answered.has(requestId) ? "already_answered" : "unknown";
      }
      const chosen = optionFor(entry.request, answer);
      entry.settle(
        chosen
          ? { outcome: { outcome: "selected", optionId: chosen.optionId } }
          : CANCELLED,
        chosen
          ? { by: "caller", decision: chosen.kind, optionId: chosen.optionId }
          : {
            by: "caller",
            decision: "cancelled",
            reason:
              "no offered option fits the answer; a rejection never becomes an approval",
          },
      );
      return "answered";
    },
    pending: () => [...open.keys()],
    cancelAll() {
      for (const entry of [...open.values()]) {
        entry.settle(CANCELLED, { by: "cancel", decision: "cancelled" });
      }
    },
  };
}

interface DecideByPolicyOptions {
  entry: OpenRequest | undefined;
  wanted: PermissionOptionKind;
  by: DecidedBy;
}

/** Decides a still-open request as the policy `wanted` would. */
function decideByPolicy({ entry, wanted, by }: DecideByPolicyOptions): void {
  if (!entry) return;
  const choice = choosePermission({
    options: entry.request.options ?? [],
    wanted,
  });
  if ("cancelled" in choice) {
    entry.settle(CANCELLED, {
      by,
      decision: "cancelled",
      reason: choice.reason,
    });
    return;
  }
  entry.settle(
    { outcome: { outcome: "selected", optionId: choice.optionId } },
    {
      by,
      decision: choice.kind,
      optionId: choice.optionId,
      reason: choice.reason,
    },
  );
}

/** The offered option an answer names; undefined when a wanted rejection cannot be honoured. */
function optionFor(
  request: RequestPermissionRequest,
  answer: PermissionAnswer,
): { optionId: string; kind: PermissionOptionKind } | undefined {
  const offered = request.options ?? [];
  if ("option_id" in answer) {
    const option = offered.find((candidate) =>
      candidate.optionId === answer.option_id
    );
    if (!option) {
      throw new RunnerError(
        "http.bad_request",
        `The agent did not offer option_id ${
          JSON.stringify(String(answer.option_id).slice(0, 80))
        }. Use one of: ${
          offered.map((candidate) => candidate.optionId).join(", ")
        }.`,
      );
    }
    return { optionId: option.optionId, kind: option.kind };
  }
  if (!PERMISSION_KINDS.includes(answer.decision)) {
    throw new RunnerError(
      "http.bad_request",
      `decision must be one of ${PERMISSION_KINDS.join(", ")}.`,
    );
  }
  const choice = choosePermission({
    options: offered,
    wanted: answer.decision,
  });
  return "cancelled" in choice ? undefined : choice;
}

/** Keeps a raw tool input short enough for an event and a button label. */
/**
 * The tool call's input as one short line. Its strings are redacted before
 * they are encoded (JSON escapes a secret's quotes and backslashes) and the
 * line is cut after (a cut could leave a secret's start).
 */
function summarise(
  value: unknown,
  secrets: readonly string[],
  limit = 400,
): string | null {
  if (value === undefined || value === null) return null;
  const redacted = redactDeep(value, secrets);
  const text = typeof redacted === "string"
    ? redacted
    : JSON.stringify(redacted);
  return text.length > limit ? `${text.slice(0, limit - 1)}…` : text;
}

function requestedData(
  requestId: string,
  request: RequestPermissionRequest,
  { expiresAt, secrets }: { expiresAt: number; secrets: readonly string[] },
): Record<string, unknown> {
  const toolCall = request.toolCall;
  return {
    request_id: requestId,
    tool_call: {
      tool_call_id: toolCall?.toolCallId ?? null,
      title: toolCall?.title ?? null,
      kind: toolCall?.kind ?? null,
      locations: (toolCall?.locations ?? []).map((location) => ({
        path: location.path,
        line: location.line ?? null,
      })),
      raw_input_summary: summarise(toolCall?.rawInput, secrets),
    },
    options: (request.options ?? []).map((option) => ({
      option_id: option.optionId,
      name: option.name,
      kind: option.kind,
    })),
    expires_at: new Date(expiresAt).toISOString(),
  };
}

function decidedData(
  requestId: string,
  request: RequestPermissionRequest,
  decided: Decision,
): Record<string, unknown> {
  return {
    request_id: requestId,
    tool_call_id: request.toolCall?.toolCallId ?? null,
    title: request.toolCall?.title ?? null,
    decision: decided.decision,
    by: decided.by,
    outcome: decided.decision === "cancelled" ? "cancelled" : "selected",
    ...(decided.optionId ? { option_id: decided.optionId } : {}),
    ...(decided.reason ? { reason: decided.reason } : {}),
  };
}
