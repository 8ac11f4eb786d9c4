// @ts-check
/// <reference lib="dom" />
/**
 * The open run's status badge and what goes with it (Cancel, the follow-up
 * box), its end, and its errors in the run panel.
 *
 * @module
 */

import { isAbort, isUnauthorized, messageOf } from "./api.js";
import { $ } from "./dom.js";
import { refreshRuns } from "./lists.js";
import { endBlocks, state } from "./state.js";
import { paintTerminalsNow, terminalsEnded } from "./terminals.js";
import { clearPending, paintAnswersNow } from "./transcript.js";
import { showConversationUsage } from "./conversation_usage.js";

/**
 * Shows the run's status. `settled`: the transcript holds the run's whole
 * story (its terminal event was read, or the stream ended).
 *
 * @param {string} status
 * @param {boolean} [settled]
 */
export function setStatus(status, settled = false) {
  if (settled) {
    // "Whole" is what the page shows, not what waits for the next frame.
    paintAnswersNow();
    paintTerminalsNow();
  }
  const badge = $("run-status");
  badge.textContent = status;
  badge.className = "badge " + status;
  badge.dataset.settled = settled ? "yes" : "no";
  const active = status === "active";
  $("cancel").hidden = !active;
  $("follow-up-send").textContent = active
    ? "Send to the running turn"
    : "Send as a new run";
  // Follow-ups need a conversation: steering (POST …/input) and new runs both go by it.
  $("follow-up").hidden = !(state.run && state.run.conversation_id);
}

/**
 * The run ended (`completed`, `failed` or `cancelled`): nothing is pending
 * any more, and the list shows its new status.
 *
 * @param {string} status
 */
export function finished(status) {
  endBlocks();
  clearPending();
  terminalsEnded();
  setStatus(status, true);
  refreshRuns().catch(() => {});
  showConversationUsage(); // now with this run's usage
}

/**
 * Shows why the open run or its events could not be read; not a refused
 * token (the sign-in form says that) or an aborted stream (another run
 * opened).
 *
 * @param {unknown} failure
 */
export function runError(failure) {
  if (isUnauthorized(failure) || isAbort(failure)) return;
  $("run-error").textContent = messageOf(failure);
}
