/**
 * Interactive approvals for a run whose turns run elsewhere (a daemon), on
 * this side: the remote engine asks (`permission.requested` arrives as a
 * turn's event) and a person's answer goes back through the turn (on a
 * daemon, a `run.permission` frame). This tracks which requests are open so
 * the HTTP answer gets 404/409/400 at once, like a local run's.
 *
 * @module
 */

import { PERMISSION_KINDS } from "../acp/permission_options.ts";
import { RunnerError } from "../errors.ts";
import type { RunEvent } from "../events.ts";
import type { AnswerOutcome, PermissionAnswer } from "./permission_desk.ts";

/** The open permission requests of one relayed run, as its events show them. */
export interface RelayedPermissions {
  /** Notes `permission.requested` and `permission.decided` events. */
  observe(event: RunEvent): void;
  /**
   * Sends an answer through `send` when the request is open; throws
   * `http.bad_request` for an option the agent did not offer.
   */
  answer(
    requestId: string,
    answer: PermissionAnswer,
    send: (requestId: string, answer: PermissionAnswer) => boolean,
  ): AnswerOutcome;
}

/** Makes the tracker of one relayed run. */
export function createRelayedPermissions(): RelayedPermissions {
  const open = new Map<string, string[]>();
  const decided = new Set<string>();
  return {
    observe(event) {
      const requestId = String(event.data.request_id ?? "");
      if (!requestId) return;
      if (event.type === "permission.requested") {
        const options = (event.data.options ?? []) as { option_id: string }[];
        open.set(requestId, options.map((option) => option.option_id));
      } else if (event.type === "permission.decided") {
        open.delete(requestId);
        decided.add(requestId);
      }
    },
    answer(requestId, answer, send) {
      const offered = open.get(requestId);
      if (!offered) {
        return decided.has(requestId) ? "already_answered" : "unknown";
      }
      checkAnswer(answer, offered);
      if (!send(requestId, answer)) return "unknown";
      open.delete(requestId);
      decided.add(requestId);
      return "answered";
    },
  };
}

function checkAnswer(answer: PermissionAnswer, offered: string[]): void {
  if ("option_id" in answer && !offered.includes(answer.option_id)) {
    throw new RunnerError(
      "http.bad_request",
      `The agent did not offer option_id ${
        JSON.stringify(String(answer.option_id).slice(0, 80))
      }. Use one of: ${offered.join(", ")}.`,
    );
  }
  if ("decision" in answer && !PERMISSION_KINDS.includes(answer.decision)) {
    throw new RunnerError(
      "http.bad_request",
      `decision must be one of ${PERMISSION_KINDS.join(", ")}.`,
    );
  }
}
