// @ts-check
/// <reference lib="dom" />
/**
 * The console's lists: runs (newest first, filtered and paged by the
 * server), connected and fenced daemons (Unfence), and warm agents (Stop).
 * A row's button stays disabled while its request is under way, across the
 * list's repaints, and the row shows why the last one failed.
 *
 * @module
 */

/** @import { Json } from "./state.js" */
import { api, errorText, isUnauthorized, messageOf } from "./api.js";
import { $, $as, el } from "./dom.js";
import { firstPrompt, state } from "./state.js";

/** Runs on a page of the list. */
export const PAGE = 20;

/** @type {(runId: string) => void} */
let chosen = () => {};

/**
 * What the console does when a run of the list is clicked: open it.
 *
 * @param {(runId: string) => void} handler
 */
export function onRunChosen(handler) {
  chosen = handler;
}

/**
 * How long a run took, or has been running.
 *
 * @param {Json} run
 * @returns {string}
 */
function duration(run) {
  const end = run.finished_at ? Date.parse(run.finished_at) : Date.now();
  const seconds = Math.max(
    0,
    Math.round((end - Date.parse(run.created_at)) / 1000),
  );
  return seconds < 60
    ? seconds + " s"
    : Math.floor(seconds / 60) + " min " + (seconds % 60) + " s";
}

function listQuery() {
  // One more than a page shows: whether an older page exists.
  const query = new URLSearchParams({ limit: String(PAGE + 1) });
  for (const [key, value] of Object.entries(state.filters)) {
    if (value) query.set(key, value);
  }
  const before = state.pages[state.pages.length - 1];
  if (before) query.set("before", before);
  return query;
}

/**
 * @param {Json} run
 * @returns {HTMLLIElement}
 */
function runRow(run) {
  const config = run.config || {};
  const item = el("li", {
    class: "run" + (run.run_id === state.selected ? " selected" : ""),
    "data-run-id": run.run_id,
  });
  item.append(el("span", { class: "badge " + run.status }, run.status));
  item.append(el("strong", {}, config.provider || "?"));
  item.append(
    el(
      "span",
      { class: "meta" },
      new Date(run.created_at).toLocaleString() + " · " + duration(run),
    ),
  );
  const snippet = firstPrompt(run.run_id) || run.prompt;
  if (snippet) {
    item.append(
      el(
        "span",
        { class: "snippet" },
        snippet.length > 80 ? snippet.slice(0, 80) + "…" : snippet,
      ),
    );
  }
  const where = [
    config.location || "local",
    config["daemon-id"],
    run.conversation_id || "no conversation",
  ].filter(Boolean);
  item.append(el("span", { class: "meta" }, where.join(" · ")));
  const picked = [
    config.model && "model " + config.model,
    config.mode && "mode " + config.mode,
  ].filter(Boolean);
  if (picked.length) {
    item.append(el("span", { class: "meta session" }, picked.join(" · ")));
  }
  item.append(el("code", { class: "run-id" }, run.run_id));
  item.onclick = () => chosen(run.run_id);
  return item;
}

let listing = 0;

/** Reads the runs list's page and shows it. */
export async function refreshRuns() {
  const mine = ++listing;
  const response = await api("/v1/runs?" + listQuery());
  if (mine !== listing) return; // a newer listing (page or filter) is under way
  if (!response.ok) throw new Error(await errorText(response));
  const body = await response.json();
  if (mine !== listing) return;
  const runs = body.runs.slice(0, PAGE);
  const list = $("runs");
  list.textContent = "";
  for (const run of runs) list.append(runRow(run));
  $("runs-empty").hidden = runs.length > 0;
  $as("runs-newer", HTMLButtonElement).disabled = state.pages.length === 0;
  $as("runs-older", HTMLButtonElement).disabled = body.runs.length <= PAGE;
  $("runs-older").dataset.last = runs.length
    ? runs[runs.length - 1].run_id
    : "";
  $("runs-page").textContent = "page " + (state.pages.length + 1);
}

/**
 * Where a daemon is connected (its replica in a fleet), its jobs in flight
 * and when it last sent a frame.
 *
 * @param {Json} daemon
 * @returns {string}
 */
function daemonInfo(daemon) {
  const jobs = daemon.active_jobs || [];
  return [
    daemon.fenced ? (daemon.connected ? "connected" : "offline") : "",
    daemon.replica_id ? "replica " + daemon.replica_id : "",
    jobs.length ? "active jobs: " + jobs.join(", ") : "no active job",
    daemon.last_seen_at
      ? "last seen " + new Date(daemon.last_seen_at).toLocaleTimeString()
      : "",
  ].filter(Boolean).join(" · ");
}

/**
 * @param {Json} daemon
 * @returns {HTMLLIElement}
 */
function daemonRow(daemon) {
  const item = el("li", {
    class: "run daemon",
    "data-daemon-id": daemon.daemon_id,
  });
  item.append(el("strong", {}, daemon.daemon_id));
  item.append(
    el(
      "span",
      { class: "badge" + (daemon.fenced ? " failed" : " completed") },
      daemon.fenced ? "fenced" : daemon.connected ? "connected" : "offline",
    ),
  );
  item.append(el("span", { class: "meta daemon-info" }, daemonInfo(daemon)));
  if (daemon.fenced) {
    const key = "daemon:" + daemon.daemon_id;
    const button = el("button", {}, "Unfence");
    button.onclick = () => {
      if (
        !confirm(
          "Unfence " + daemon.daemon_id +
            "? Only do this once you checked no agent of it is still running.",
        )
      ) return;
      rowAction(
        key,
        button,
        () =>
          api(
            "/v1/daemons/" + encodeURIComponent(daemon.daemon_id) + "/unfence",
            { method: "POST", body: "{}" },
          ),
        refreshDaemons,
      );
    };
    item.append(button, rowError(key, button));
  }
  return item;
}

/** Reads the daemons and shows them. */
export async function refreshDaemons() {
  const response = await api("/v1/daemons");
  if (!response.ok) throw new Error(await errorText(response));
  const body = await response.json();
  const list = $("daemons");
  list.textContent = "";
  for (const daemon of body.daemons) list.append(daemonRow(daemon));
  $("daemons-empty").hidden = body.daemons.length > 0;
}

/** Reads the warm agents and shows them; a runner without the pool hides the panel. */
export async function refreshAgents() {
  const response = await api("/v1/agents");
  if (response.status === 404) {
    $("agents-panel").hidden = true;
    return;
  }
  if (!response.ok) throw new Error(await errorText(response));
  const body = await response.json();
  const list = $("agents");
  list.textContent = "";
  for (const agent of body.agents) {
    const item = el("li", { class: "run", "data-agent-id": agent.agent_id });
    item.append(el("strong", {}, agent.provider));
    item.append(
      el(
        "span",
        { class: "meta agent-info" },
        [
          agent.location,
          agent.conversation_id,
          agent.replica_id ? "replica " + agent.replica_id : "",
          "idle since " + new Date(agent.idle_since).toLocaleTimeString(),
        ].filter(Boolean).join(" · "),
      ),
    );
    const key = "agent:" + agent.agent_id;
    const stop = el("button", { class: "stop" }, "Stop");
    stop.onclick = () =>
      rowAction(
        key,
        stop,
        () =>
          api("/v1/agents/" + encodeURIComponent(agent.agent_id), {
            method: "DELETE",
          }),
        refreshAgents,
      );
    item.append(stop, rowError(key, stop));
    list.append(item);
  }
  $("agents-empty").hidden = body.agents.length > 0;
}

/**
 * The row's error line; its button disabled while its request is under way.
 *
 * @param {string} key
 * @param {HTMLButtonElement} button
 */
function rowError(key, button) {
  button.disabled = state.rowBusy.has(key);
  return el(
    "span",
    { class: "error row-error" },
    state.rowErrors.get(key) || "",
  );
}

/**
 * Sends a row's request once at a time, then repaints the list.
 *
 * @param {string} key
 * @param {HTMLButtonElement} button
 * @param {() => Promise<Response>} request
 * @param {() => Promise<void>} refresh
 */
async function rowAction(key, button, request, refresh) {
  if (state.rowBusy.has(key)) return;
  state.rowBusy.add(key);
  state.rowErrors.delete(key);
  button.disabled = true;
  const shown = button.parentNode &&
    button.parentNode.querySelector(".row-error");
  if (shown) shown.textContent = "";
  try {
    const response = await request();
    if (!response.ok) state.rowErrors.set(key, await errorText(response));
  } catch (failure) {
    if (!isUnauthorized(failure)) {
      state.rowErrors.set(
        key,
        "The request did not reach the runner (" + messageOf(failure) + ").",
      );
    }
  } finally {
    state.rowBusy.delete(key);
  }
  await refresh().catch(() => {});
  // The row is repainted from the list; a list that failed to load keeps this one.
  if (button.isConnected) {
    button.disabled = false;
    const node = button.parentNode &&
      button.parentNode.querySelector(".row-error");
    if (node) node.textContent = state.rowErrors.get(key) || "";
  }
}
