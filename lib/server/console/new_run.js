// @ts-check
/// <reference lib="dom" />
/**
 * The New run form: prompt, provider (the presets of `GET /v1/providers`),
 * conversation, workspace, permission decisions, model, mode and more run
 * config as JSON. Start run is disabled while its request is under way, and
 * a form sent again after a lost answer reuses its run id.
 *
 * @module
 */

import { api, isUnauthorized, messageOf, newRunId, postRun } from "./api.js";
import { $, $as, el, setValue, valueOf } from "./dom.js";
import { refreshRuns } from "./lists.js";
import { runError } from "./run_status.js";
import { openRun } from "./run_view.js";
import { state } from "./state.js";

/** Fills the provider choice once. */
export async function loadProviders() {
  if (state.providers) return;
  const response = await api("/v1/providers");
  /** @type {string[]} */
  const names = response.ok
    ? (await response.json()).presets.map((/** @type {{ name: string }} */ p) =>
      p.name
    )
    : [];
  state.providers = names.concat(["custom"]);
  const select = $("new-provider");
  select.textContent = "";
  for (const name of state.providers) {
    select.append(el("option", { value: name }, name));
  }
}

/** The `POST /v1/runs` body the form says. */
function newRunBody() {
  const config = JSON.parse(valueOf("new-config").trim() || "{}");
  if (!config || typeof config !== "object" || Array.isArray(config)) {
    throw new Error("Extra config must be a JSON object of run-config keys.");
  }
  config.provider = valueOf("new-provider");
  for (
    const [id, key] of [
      ["new-workspace", "workspace"],
      ["new-model", "model"],
      ["new-mode", "mode"],
    ]
  ) {
    if (valueOf(id).trim()) config[key] = valueOf(id).trim();
  }
  if (valueOf("new-permission")) {
    config["permission-decision"] = valueOf("new-permission");
  }
  /** @type {{ input: { text: string }, conversation_id?: string, config: Record<string, unknown> }} */
  const body = { input: { text: valueOf("new-prompt") }, config };
  if (valueOf("new-conversation").trim()) {
    body.conversation_id = valueOf("new-conversation").trim();
  }
  return body;
}

/**
 * The form's submit: starts the run and opens it.
 *
 * @param {Event} event
 */
export async function submitNewRun(event) {
  event.preventDefault();
  const submit = $as("new-run-submit", HTMLButtonElement);
  if (submit.disabled) return;
  $("new-error").textContent = "";
  submit.disabled = true;
  // One run id per form: an attempt whose answer was lost and is sent again cannot start a second run.
  state.newRunId = state.newRunId || newRunId();
  try {
    const runId = await postRun(newRunBody(), state.newRunId);
    state.newRunId = null;
    $("new-run").hidden = true;
    setValue("new-prompt", "");
    await refreshRuns().catch(() => {});
    openRun(runId).catch(runError);
  } catch (failure) {
    if (!isUnauthorized(failure)) {
      $("new-error").textContent = messageOf(failure);
    }
  } finally {
    submit.disabled = false;
  }
}
