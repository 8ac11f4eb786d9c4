// @ts-check
/// <reference lib="dom" />
/**
 * The console's state in this tab: what is open, shown and under way, the
 * settings the page was served with, and what the tab keeps in its session
 * storage (the API token, the first prompts of the runs it started).
 *
 * @module
 */

/**
 * A JSON object the API sent: a run record, an event or its data. Its shape
 * is the API's, not checked here; every text in it is untrusted.
 *
 * @typedef {Record<string, any>} Json
 */

/**
 * A follow-up this tab sent, shown as pending until its `turn.started` comes.
 *
 * @typedef {object} Pending
 * @property {string} text What was sent.
 * @property {HTMLElement} node Its bubble below the transcript.
 */

/**
 * The agent's answer being streamed into one bubble.
 *
 * @typedef {object} Answer
 * @property {HTMLElement} node The bubble.
 * @property {string} text The Markdown so far.
 * @property {boolean} pending A paint is scheduled for the next frame.
 */

/**
 * A terminal of the run (ACP client terminal) and its block on the page.
 *
 * @typedef {object} Terminal
 * @property {string} id The terminal id.
 * @property {HTMLElement} block Its head, output and status.
 * @property {HTMLElement} pre Its output, as text nodes.
 * @property {string} tail An escape sequence cut off at the end, waiting for the rest.
 * @property {string[]} queued Output not painted yet.
 * @property {number} queuedLength The length of `queued`.
 * @property {number} kept The length of the output on the page.
 * @property {boolean} painting A paint is scheduled for the next frame.
 * @property {boolean} cut Earlier output was dropped.
 * @property {HTMLElement | null} card Its own card while no tool card shows it.
 * @property {string} commandLine The command line, shell-quoted.
 * @property {boolean} follow The output follows its end (not scrolled up).
 * @property {boolean} exited Its `terminal.exited` came.
 */

/**
 * The runs list's filters: the query parameters of `GET /v1/runs`.
 *
 * @typedef {{ status: string, conversation_id: string, daemon_id: string }} Filters
 */

/** The session-storage key of the API token. */
export const TOKEN_KEY = "runner-token";

/** The operator allowed images from the agent's URLs (`/?images=1`). */
export const IMAGES = document.body.dataset.images === "1";

/** The run-config keys a caller may set on this server, as the page was served. */
export const CALLER_KEYS = new Set(
  /** @type {string[]} */ (JSON.parse(
    document.body.dataset.callerKeys || "[]",
  )),
);

/** What the console shows and has under way. */
export const state = {
  /** The API token (read from session storage once the URL's is taken). */
  token: "",
  /** @type {string | null} The run open in the run panel. */
  selected: null,
  /** @type {Json | null} Its record, once loaded. */
  run: null,
  /** @type {AbortController | null} The open run's event stream. */
  stream: null,
  /** @type {string[]} The `before` cursor of each page after the first. */
  pages: [],
  /** @type {Filters} */
  filters: { status: "", conversation_id: "", daemon_id: "" },
  /** @type {Answer | null} The answer bubble text now streams into. */
  answer: null,
  /** @type {HTMLDetailsElement | null} The thought block text now streams into. */
  thought: null,
  /** @type {Set<ReturnType<typeof setInterval>>} The open run's countdowns. */
  timers: new Set(),
  /** @type {string[] | null} The providers of the new-run form, once loaded. */
  providers: null,
  /** @type {Pending[]} */
  pending: [],
  /** @type {Map<string, Terminal>} The open run's terminals by id. */
  terminals: new Map(),
  /** @type {ReturnType<typeof setInterval> | null} The poll's interval, while polling. */
  poll: null,
  /** The poll's ticks so far. */
  ticks: 0,
  /** @type {string | null} The run id the new-run form sends until it changes. */
  newRunId: null,
  /** @type {Set<string>} Rows whose Stop or Unfence is under way. */
  rowBusy: new Set(),
  /** @type {Map<string, string>} Why a row's last Stop or Unfence failed. */
  rowErrors: new Map(),
};

// The runner keeps the start of a run's first prompt (the run record's prompt) and
// each follow-up (turn.started events); the tab that started a run keeps its whole first prompt.

/**
 * The whole first prompt of a run this tab started, if it did.
 *
 * @param {string} runId
 * @returns {string | null}
 */
export function firstPrompt(runId) {
  return sessionStorage.getItem("runner-prompt:" + runId);
}

/**
 * Keeps the whole first prompt of a run this tab started.
 *
 * @param {string} runId
 * @param {string} text
 */
export function rememberFirstPrompt(runId, text) {
  sessionStorage.setItem("runner-prompt:" + runId, text);
}

/** Forgets what the answer and thought blocks stream into: the next text starts new ones. */
export function endBlocks() {
  state.answer = null;
  state.thought = null;
}
