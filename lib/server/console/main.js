// @ts-check
/// <reference lib="dom" />
/**
 * The operator console's entry module, loaded by the page (`console_page.ts`)
 * under its nonce: it talks to the same `/v1` API as any client, with the
 * bearer token a person types once or opens the console with (`#token=…` in
 * the fragment of the URL `runner serve` prints, taken once and removed from
 * the address bar); the token is kept in the tab's session storage. This
 * module signs in, loads the panels, polls them and wires the controls.
 *
 * @module
 */

import { isUnauthorized, messageOf, onUnauthorized } from "./api.js";
import { $, $as } from "./dom.js";
import { downloadTranscript } from "./download.js";
import { cancelRun, sendFollowUp } from "./follow_up.js";
import {
  onRunChosen,
  refreshAgents,
  refreshDaemons,
  refreshRuns,
} from "./lists.js";
import { loadProviders, submitNewRun } from "./new_run.js";
import { runError } from "./run_status.js";
import { openRun } from "./run_view.js";
import { CALLER_KEYS, IMAGES, state, TOKEN_KEY } from "./state.js";
import { restoreHash, saveHash, takeTokenFromUrl } from "./url_state.js";

/**
 * A panel of the page: its name, its error line and how it loads.
 *
 * @typedef {[name: string, errorId: string, load: () => Promise<void>]} Panel
 */

// Each panel shows its own failure; the page lists them with a Retry.
/** @type {Panel[]} */
const PANELS = [
  ["runs", "runs-error", () => refreshRuns()],
  ["daemons", "daemons-error", () => refreshDaemons()],
  ["warm agents", "agents-error", () => refreshAgents()],
];

/** @param {string} [message] */
function showLogin(message) {
  stopPolling();
  $("login").hidden = false;
  $("app").hidden = true;
  $("sign-out").hidden = true;
  $("login-message").textContent = message || "";
}

/** @param {Panel} panel */
async function loadPanel([, errorId, load]) {
  try {
    await load();
    $(errorId).textContent = "";
  } catch (failure) {
    if (!isUnauthorized(failure)) $(errorId).textContent = messageOf(failure);
    throw failure;
  }
}

async function loadVersion() {
  const response = await fetch("/healthz");
  const health = await response.json().catch(() => ({}));
  if (health.version) $("version").textContent = "v" + health.version;
  if (!response.ok) {
    throw new Error(
      "HTTP " + response.status +
        (health.store && health.store.ok === false
          ? " (the store is unavailable)"
          : ""),
    );
  }
}

/** @param {string[]} failed */
function showPageError(failed) {
  $("page-error").hidden = failed.length === 0;
  $("page-error-text").textContent = failed.length
    ? "Part of the console did not load: " + failed.join("; ") + "."
    : "";
}

/**
 * Loads every panel (and the version); says whether the token was refused
 * and what failed.
 *
 * @param {boolean} withVersion
 */
async function loadAll(withVersion) {
  /** @type {Array<[string, () => Promise<void>]>} */
  const parts = PANELS.map((panel) => [panel[0], () => loadPanel(panel)]);
  if (withVersion) parts.unshift(["/healthz", loadVersion]);
  const results = await Promise.allSettled(parts.map(([, load]) => load()));
  const refused = results.some((r) =>
    r.status === "rejected" && isUnauthorized(r.reason)
  );
  const failed = parts.flatMap(([name], i) => {
    const result = results[i];
    return result.status === "rejected"
      ? [name + ": " + messageOf(result.reason)]
      : [];
  });
  return { refused, failed };
}

// One poll at a time, none while signed out; a hidden tab skips its ticks, and the
// daemons and warm agents (which fan out to every replica of a fleet) are read every third.
function startPolling() {
  stopPolling();
  state.poll = setInterval(tick, 1500);
}

function stopPolling() {
  if (state.poll !== null) clearInterval(state.poll);
  state.poll = null;
}

function tick() {
  if (document.hidden) return;
  const all = state.ticks++ % 3 === 0;
  const panels = all ? PANELS : PANELS.slice(0, 1);
  Promise.allSettled(panels.map(loadPanel)).then((results) => {
    if (all && results.every((r) => r.status === "fulfilled")) {
      showPageError([]);
    }
  });
}

async function start() {
  stopPolling();
  const opened = restoreHash();
  const { refused, failed } = await loadAll(true);
  if (refused) return;
  $("login").hidden = true;
  $("app").hidden = false;
  $("sign-out").hidden = false;
  showPageError(failed);
  startPolling();
  // Also after signing in again: a stream refused with the old token has stopped.
  if (opened) openRun(opened).catch(runError);
}

/**
 * Changes the list's filters or page, keeps them in the URL and reads the list.
 *
 * @param {() => void} change
 */
function changeList(change) {
  change();
  saveHash();
  loadPanel(PANELS[0]).catch(() => {});
}

function wireControls() {
  $("follow-up").onsubmit = sendFollowUp;
  $("cancel").onclick = cancelRun;
  $("download-md").onclick = () => downloadTranscript("md");
  $("download-json").onclick = () => downloadTranscript("json");
  $("new-run-open").onclick = () => {
    $("new-run").hidden = !$("new-run").hidden;
    loadProviders().catch(() => {});
  };
  $("new-run").onsubmit = submitNewRun;
  $("new-run").oninput = () => {
    state.newRunId = null;
  };
  $("filters").onsubmit = (event) => {
    event.preventDefault();
    changeList(() => {
      state.filters = {
        status: $as("filter-status", HTMLSelectElement).value,
        conversation_id: $as("filter-conversation", HTMLInputElement).value
          .trim(),
        daemon_id: $as("filter-daemon", HTMLInputElement).value.trim(),
      };
      state.pages = [];
    });
  };
  $("runs-older").onclick = () =>
    changeList(() => state.pages.push($("runs-older").dataset.last || ""));
  $("runs-newer").onclick = () => changeList(() => state.pages.pop());
  $("back-to-runs").onclick = () =>
    $("runs-panel").scrollIntoView({ block: "start" });
  const images = $as("images", HTMLInputElement);
  images.checked = IMAGES;
  images.onchange = () => {
    location.assign(
      location.pathname + (images.checked ? "?images=1" : "") + location.hash,
    );
  };
  $("page-retry").onclick = () => start();
  $("new-keys-list").textContent = [...CALLER_KEYS].join(", ");
  onUnauthorized(showLogin);
  onRunChosen((runId) => openRun(runId).catch(runError));
}

takeTokenFromUrl();
state.token = sessionStorage.getItem(TOKEN_KEY) || "";

$("login").onsubmit = (event) => {
  event.preventDefault();
  state.token = $as("token", HTMLInputElement).value.trim();
  sessionStorage.setItem(TOKEN_KEY, state.token);
  start();
};
$("sign-out").onclick = () => {
  sessionStorage.removeItem(TOKEN_KEY);
  state.token = "";
  location.reload();
};
document.addEventListener("visibilitychange", () => {
  if (!document.hidden && state.poll !== null) tick();
});
wireControls();
start();
