// @ts-check
/// <reference lib="dom" />
/**
 * Opening a run in the run panel: its record, then its events
 * (`run_events.js`). Everything after an await checks the run is still the
 * one open: a newer `openRun` replaces it.
 *
 * @module
 */

/** @import { Json } from "./state.js" */
import { api, errorText, isAbort, messageOf } from "./api.js";
import { showCarried } from "./carried.js";
import { showConversationUsage } from "./conversation_usage.js";
import { $, transcript } from "./dom.js";
import { followEvents } from "./run_events.js";
import { runError, setStatus } from "./run_status.js";
import { endBlocks, firstPrompt, state } from "./state.js";
import { clearPending, userBubble } from "./transcript.js";
import { saveHash } from "./url_state.js";

/** @param {Json} run */
function showRunRecord(run) {
  state.run = run;
  const config = run.config || {};
  $("run-meta").textContent = [
    config.provider,
    config.location || "local",
    config["daemon-id"],
    config.workspace,
    run.conversation_id
      ? "conversation " + run.conversation_id
      : "no conversation",
    "started " + new Date(run.created_at).toLocaleString(),
  ].filter(Boolean).join(" · ");
  setStatus(run.status);
  showCarried();
  showConversationUsage();
  // The first prompt is the run's own input; each follow-up comes as a turn.started event.
  const prompt = run.prompt;
  const first = firstPrompt(run.run_id) ||
    (prompt ? prompt + (prompt.length >= 200 ? "…" : "") : "");
  if (first) userBubble(first);
}

/**
 * Clears the run panel for `runId` and makes it the open run.
 *
 * @param {string} runId
 * @returns {AbortController} The run's stream, aborted when another opens.
 */
function resetPanel(runId) {
  if (state.stream) state.stream.abort();
  state.timers.forEach((t) => clearInterval(t));
  state.timers.clear();
  const stream = new AbortController();
  state.selected = runId;
  state.stream = stream;
  state.run = null;
  endBlocks();
  state.terminals = new Map();
  clearPending();
  saveHash();
  $("run-panel").hidden = false;
  $("run-title").textContent = runId;
  for (
    const id of [
      "run-usage",
      "conversation-usage",
      "download-error",
      "follow-up-error",
      "run-meta",
      "run-error",
      "run-stream",
    ]
  ) $(id).textContent = "";
  setStatus("loading");
  transcript().textContent = "";
  document.querySelectorAll("li.run").forEach((li) =>
    li instanceof HTMLElement &&
    li.classList.toggle("selected", li.dataset.runId === runId)
  );
  // On a phone the panel sits above the list: bring it into view.
  $("run-panel").scrollIntoView({ block: "start" });
  return stream;
}

/**
 * Opens a run: its record, then its events until its terminal event.
 *
 * @param {string} runId
 */
export async function openRun(runId) {
  const stream = resetPanel(runId);
  try {
    const record = await api(
      "/v1/runs/" + encodeURIComponent(runId) + "?completions=lean",
      { signal: stream.signal },
    );
    if (state.stream !== stream) return;
    if (!record.ok) {
      setStatus("unknown");
      runError("The run could not be loaded: " + await errorText(record));
      return;
    }
    const run = await record.json();
    if (state.stream !== stream) return;
    showRunRecord(run);
  } catch (failure) {
    if (state.stream !== stream) return;
    setStatus("unknown");
    runError(
      isAbort(failure) ? failure : new Error(
        "The run could not be loaded (" + messageOf(failure) + ").",
      ),
    );
    return;
  }
  await followEvents(runId, stream);
}
