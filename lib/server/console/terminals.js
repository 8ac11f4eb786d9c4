// @ts-check
/// <reference lib="dom" />
/**
 * Terminals (ACP client terminals): each one's output streams into a
 * monospace block, set as text only, inside the tool card whose latest
 * `terminal_ids` names it, or a card of its own until one does. ANSI escapes
 * and other control characters are stripped; the page keeps only the last
 * {@linkcode TERMINAL_KEEP} characters of each terminal.
 *
 * @module
 */

/** @import { Json, Terminal } from "./state.js" */
import { el, part, transcript } from "./dom.js";
import { endBlocks, state } from "./state.js";

/** How much of a terminal's output the page keeps, in characters. */
export const TERMINAL_KEEP = 256 * 1024;
const CONTROL =
  // deno-lint-ignore no-control-regex -- matching the control characters the page strips is the point
  /\x1b\[[0-?]*[ -\/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]|\x9b[0-?]*[ -\/]*[@-~]|[\x00-\x08\x0b-\x1f\x7f-\x9f]/g;
// An escape sequence cut off at the end of a chunk.
const OPEN_ESCAPE =
  // deno-lint-ignore no-control-regex -- matching ESC is the point
  /(?:\x1b(?:\[[0-?]*[ -\/]*|\][^\x07\x1b]{0,256})?|\x9b[0-?]*[ -\/]*)$/;

/**
 * A command-line word as a shell would need it quoted.
 *
 * @param {unknown} word
 * @returns {string}
 */
function shellWord(word) {
  const text = String(word);
  return /^[\w@%+=:,.\/-]+$/.test(text)
    ? text
    : "'" + text.replace(/'/g, "'\\''") + "'";
}

/**
 * The terminal with this id, made on first sight.
 *
 * @param {string} id
 * @returns {Terminal}
 */
function terminalRecord(id) {
  const known = state.terminals.get(id);
  if (known) return known;
  const block = el("div", { class: "terminal", "data-terminal-id": id });
  const head = el("div", { class: "terminal-head" });
  head.append(
    el("code", { class: "command" }, "terminal " + id),
    el("span", { class: "meta cwd" }),
  );
  head.append(
    el("span", { class: "badge truncated", hidden: "" }, "truncated"),
  );
  const pre = el("pre", { class: "terminal-output" });
  const cut = el(
    "div",
    { class: "note terminal-cut", hidden: "" },
    "Earlier output is not shown: the page keeps the last 256 KiB of it.",
  );
  block.append(
    head,
    cut,
    pre,
    el("div", { class: "meta terminal-status" }, "running…"),
  );
  /** @type {Terminal} */
  const term = {
    id,
    block,
    pre,
    tail: "",
    queued: [],
    queuedLength: 0,
    kept: 0,
    painting: false,
    cut: false,
    card: null,
    commandLine: "",
    follow: true,
    exited: false,
  };
  // The output follows its end unless the operator scrolled up (a moved block loses its scroll, not this).
  pre.addEventListener("scroll", () => {
    term.follow = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 8;
  });
  state.terminals.set(id, term);
  return term;
}

/**
 * A terminal no tool card shows yet gets a card of its own, where the run is now.
 *
 * @param {Terminal} term
 */
function placeTerminal(term) {
  if (term.block.isConnected) return;
  endBlocks();
  const card = el("details", {
    class: "tool terminal-card",
    open: "",
    "data-terminal-card": term.id,
  });
  const summary = el("summary");
  summary.append(
    el("span", { class: "kind" }, "terminal"),
    el("span", { class: "title" }, term.commandLine || term.id),
  );
  card.append(summary, term.block);
  transcript().append(card);
  term.card = card;
}

/**
 * Moves the terminals a tool card names into it.
 *
 * @param {HTMLDetailsElement} card
 * @param {unknown[]} ids
 */
export function attachTerminals(card, ids) {
  let box = card.querySelector(".terminals");
  if (!box) {
    box = el("div", { class: "terminals" });
    part(card, ".output-label").before(box);
  }
  for (const id of ids) {
    const term = terminalRecord(String(id));
    if (term.block.parentNode === box) continue;
    box.append(term.block);
    if (term.card) {
      term.card.remove();
      term.card = null;
    }
    card.open = true;
    if (term.follow) term.pre.scrollTop = term.pre.scrollHeight;
  }
}

/**
 * `terminal.started`: the command line and where it runs.
 *
 * @param {Json} data
 */
export function terminalStarted(data) {
  const term = terminalRecord(String(data.terminal_id));
  term.commandLine = [data.command].concat(
    Array.isArray(data.args) ? data.args : [],
  ).map(shellWord).join(" ");
  part(term.block, ".command").textContent = "$ " + term.commandLine;
  part(term.block, ".cwd").textContent = data.cwd === "."
    ? "in the workspace"
    : data.cwd
    ? "in " + data.cwd
    : "";
  placeTerminal(term);
  if (term.card) part(term.card, ".title").textContent = term.commandLine;
}

/** @param {Terminal} term */
function markTruncated(term) {
  part(term.block, ".badge.truncated").hidden = false;
}

/**
 * Text without escapes; an escape cut off at the end waits for the rest of it.
 *
 * @param {Terminal} term
 * @param {string} text
 * @returns {string}
 */
function cleanOutput(term, text) {
  let raw = term.tail + text;
  const open = raw.match(OPEN_ESCAPE);
  term.tail = open ? open[0] : "";
  if (open) raw = raw.slice(0, open.index);
  return raw.replace(/\r\n/g, "\n").replace(CONTROL, "");
}

/**
 * `terminal.output`: queued for the next frame.
 *
 * @param {Json} data
 */
export function terminalOutput(data) {
  const term = terminalRecord(String(data.terminal_id));
  placeTerminal(term);
  if (data.truncated) markTruncated(term);
  const text = cleanOutput(
    term,
    typeof data.output === "string" ? data.output : "",
  );
  if (!text) return;
  term.queued.push(text);
  term.queuedLength += text.length;
  if (term.queuedLength > 2 * TERMINAL_KEEP) { // a hidden tab paints nothing: keep the queue bounded
    term.queued = [term.queued.join("").slice(-TERMINAL_KEEP)];
    term.queuedLength = TERMINAL_KEEP;
    term.cut = true;
  }
  if (!term.painting) {
    term.painting = true;
    requestAnimationFrame(() => paintTerminal(term));
  }
}

/** Paints now the terminal output that waits for the next frame. */
export function paintTerminalsNow() {
  for (const term of state.terminals.values()) paintTerminal(term);
}

/**
 * Appends what came since the last frame as text and drops the oldest text past the cap.
 *
 * @param {Terminal} term
 */
function paintTerminal(term) {
  if (!term.painting) return; // painted already, at the run's end
  term.painting = false;
  let text = term.queued.join("");
  term.queued = [];
  term.queuedLength = 0;
  if (text.length > TERMINAL_KEEP) {
    text = text.slice(-TERMINAL_KEEP);
    term.cut = true;
  }
  const pre = term.pre;
  const last = pre.lastChild;
  if (last instanceof Text && last.length < 16384) last.appendData(text);
  else pre.append(document.createTextNode(text));
  term.kept += text.length;
  while (term.kept > TERMINAL_KEEP && pre.firstChild instanceof Text) {
    const first = pre.firstChild;
    const excess = term.kept - TERMINAL_KEEP;
    if (first.length <= excess) {
      term.kept -= first.length;
      first.remove();
    } else {
      first.deleteData(0, excess);
      term.kept -= excess;
    }
    term.cut = true;
  }
  if (term.cut) part(term.block, ".terminal-cut").hidden = false;
  if (term.follow) pre.scrollTop = pre.scrollHeight;
}

/**
 * `terminal.exited`: its exit code, signal or time-out.
 *
 * @param {Json} data
 */
export function terminalExited(data) {
  const term = terminalRecord(String(data.terminal_id));
  placeTerminal(term);
  if (data.truncated) markTruncated(term);
  term.tail = "";
  term.exited = true;
  const parts = [];
  if (data.timed_out) parts.push("timed out");
  if (typeof data.exit_code === "number") {
    parts.push("exit code " + data.exit_code);
  }
  if (data.signal) parts.push("killed by " + data.signal);
  const ok = data.exit_code === 0 && !data.signal && !data.timed_out;
  const status = part(term.block, ".terminal-status");
  status.textContent = "exited: " + (parts.join(" · ") || "no exit status");
  status.className = "meta terminal-status " + (ok ? "ok" : "failed");
}

/** The run ended: a terminal without its `terminal.exited` says so. */
export function terminalsEnded() {
  for (const term of state.terminals.values()) {
    if (!term.exited) {
      part(term.block, ".terminal-status").textContent =
        "no exit status: the run ended";
    }
  }
}
