// @ts-check
/// <reference lib="dom" />
/**
 * The run panel's controls: a follow-up sent into the running turn
 * (`POST …/input`) or, once the run has ended, as a new run of its
 * conversation with the carried settings; and Cancel.
 *
 * @module
 */

import {
  api,
  errorText,
  isUnauthorized,
  messageOf,
  newRunId,
  postRun,
} from "./api.js";
import { carriedConfig } from "./carried.js";
import { $, $as, part, setValue, valueOf } from "./dom.js";
import { runError } from "./run_status.js";
import { openRun } from "./run_view.js";
import { state } from "./state.js";
import { addPending, dropPending } from "./transcript.js";

/**
 * Sends a follow-up into the running run; it shows as pending until its
 * `turn.started` arrives.
 *
 * @param {string} runId
 * @param {string} text
 */
async function steer(runId, text) {
  const pending = addPending(text);
  try {
    const response = await api(
      "/v1/runs/" + encodeURIComponent(runId) + "/input",
      { method: "POST", body: JSON.stringify({ input: { text } }) },
    );
    if (!response.ok) throw new Error(await errorText(response));
    part(pending.node, ".who").textContent = "You · queued for the next turn";
  } catch (failure) {
    dropPending(pending);
    throw failure;
  }
}

/**
 * The follow-up form's submit.
 *
 * @param {Event} event
 */
export async function sendFollowUp(event) {
  event.preventDefault();
  const send = $as("follow-up-send", HTMLButtonElement);
  const text = valueOf("follow-up-text").trim();
  const run = state.run;
  if (!text || !run || send.disabled) return;
  $("follow-up-error").textContent = "";
  send.disabled = true;
  try {
    if ($("run-status").textContent === "active") {
      await steer(run.run_id, text);
    } else {
      const runId = await postRun({
        conversation_id: run.conversation_id,
        input: { text },
        config: carriedConfig(),
      }, newRunId());
      openRun(runId).catch(runError);
    }
    setValue("follow-up-text", "");
  } catch (failure) {
    if (!isUnauthorized(failure)) {
      $("follow-up-error").textContent = messageOf(failure);
    }
  } finally {
    send.disabled = false;
  }
}

/** Cancel: asks the runner to cancel the open run. */
export async function cancelRun() {
  if (!state.run) return;
  const cancel = $as("cancel", HTMLButtonElement);
  cancel.disabled = true;
  try {
    const response = await api(
      "/v1/runs/" + encodeURIComponent(state.run.run_id) + "/cancel",
      { method: "POST", body: "{}" },
    );
    if (!response.ok) {
      $("follow-up-error").textContent = await errorText(response);
    }
  } catch (failure) {
    if (!isUnauthorized(failure)) {
      $("follow-up-error").textContent = messageOf(failure);
    }
  } finally {
    cancel.disabled = false;
  }
}
