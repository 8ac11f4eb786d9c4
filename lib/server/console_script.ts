/**
 * The operator console's script: a module that loads the Markdown renderer
 * and the sanitiser (`console_assets.ts`) and talks to the same `/v1` API as
 * any client, with the bearer token a person types once or opens the
 * console with (`#token=…` in the fragment of the URL `runner serve`
 * prints, taken once and removed from the address bar); it is kept in the
 * tab's session storage. Every text from the agent or a run is set
 * as text, except the answer, which is Markdown rendered and then sanitised.
 *
 * @module
 */

/** The console's module script (no `${`, no backticks: kept raw). */
export const CONSOLE_SCRIPT: string = String.raw`
import { Marked } from "/console/marked.js";
import DOMPurify from "/console/purify.js";

// The URL runner serve prints carries the token in its fragment (never sent, so never
// logged): keep it in this tab and take it out of the address bar and its history entry.
function takeTokenFromUrl() {
  const params = new URLSearchParams(location.hash.slice(1));
  const token = params.get("token");
  if (token === null) return;
  params.delete("token");
  if (token.trim()) sessionStorage.setItem("runner-token", token.trim());
  const hash = params.toString();
  history.replaceState(null, "", location.pathname + location.search + (hash ? "#" + hash : ""));
}
takeTokenFromUrl();

const $ = (id) => document.getElementById(id);
const IMAGES = document.body.dataset.images === "1";
const state = {
  token: sessionStorage.getItem("runner-token") || "", selected: null, run: null, stream: null,
  pages: [], filters: { status: "", conversation_id: "", daemon_id: "" }, answer: null, thought: null,
  timers: new Set(), providers: null, pending: [], terminals: new Map(),
  poll: null, ticks: 0, newRunId: null, rowBusy: new Set(), rowErrors: new Map(),
};

function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

// Agent HTML is shown as text, never parsed; DOMPurify then keeps only inert markup.
const markdown = new Marked({ gfm: true, renderer: { html: (token) => escapeHtml(token.text) } });
DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    node.setAttribute("rel", "noopener noreferrer nofollow");
    node.setAttribute("target", "_blank");
  }
  // The page's CSP takes agent images only over https: an http: one would be blocked anyway.
  if (node.tagName === "IMG" && IMAGES && !/^(?:https:|data:)/i.test(node.getAttribute("src") || "")) {
    node.removeAttribute("src");
    node.removeAttribute("srcset");
    node.setAttribute("alt", "[image not loaded: not https: " + (node.getAttribute("alt") || "image") + "]");
  }
  if (node.tagName === "IMG" && !IMAGES) {
    node.setAttribute("data-src", node.getAttribute("src") || "");
    node.removeAttribute("src");
    node.removeAttribute("srcset");
    node.setAttribute("alt", "[image not loaded: " + (node.getAttribute("alt") || "image") + "]");
  }
});

/** The agent's Markdown as a sanitised fragment: no script, handler, style or javascript: URL survives. */
function renderMarkdown(text) {
  return DOMPurify.sanitize(markdown.parse(text || ""), {
    RETURN_DOM_FRAGMENT: true,
    FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "iframe", "object", "embed", "svg", "math"],
    FORBID_ATTR: ["style", "id", "class"],
    ALLOWED_URI_REGEXP: /^(?:https?:|mailto:|#)/i,
  });
}

function headers(extra) {
  const h = Object.assign({ "content-type": "application/json" }, extra || {});
  if (state.token) h.authorization = "Bearer " + state.token;
  return h;
}

async function api(path, options) {
  const response = await fetch(path, Object.assign({ headers: headers() }, options || {}));
  if (response.status === 401) {
    showLogin(state.token ? "The runner refused this token. Check it and sign in again." : "This runner needs its API token.");
    throw new Error("unauthorized");
  }
  return response;
}

async function errorText(response) {
  try { const body = await response.json(); return (body.error && (body.error.code + ": " + body.error.message)) || response.statusText; }
  catch { return "HTTP " + response.status; }
}

function showLogin(message) {
  stopPolling();
  $("login").hidden = false; $("app").hidden = true; $("sign-out").hidden = true;
  $("login-message").textContent = message || "";
}

function el(tag, attrs, text) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

function duration(run) {
  const end = run.finished_at ? Date.parse(run.finished_at) : Date.now();
  const seconds = Math.max(0, Math.round((end - Date.parse(run.created_at)) / 1000));
  return seconds < 60 ? seconds + " s" : Math.floor(seconds / 60) + " min " + (seconds % 60) + " s";
}

// The runner keeps the start of a run's first prompt (the run record's prompt) and
// each follow-up (turn.started events); the tab that started a run keeps its whole first prompt.
function firstPrompt(runId) { return sessionStorage.getItem("runner-prompt:" + runId); }
function rememberFirstPrompt(runId, text) { sessionStorage.setItem("runner-prompt:" + runId, text); }

const PAGE = 20;

function listQuery() {
  // One more than a page shows: whether an older page exists.
  const query = new URLSearchParams({ limit: String(PAGE + 1) });
  for (const [key, value] of Object.entries(state.filters)) if (value) query.set(key, value);
  const before = state.pages[state.pages.length - 1];
  if (before) query.set("before", before);
  return query;
}

function runRow(run) {
  const config = run.config || {};
  const item = el("li", { class: "run" + (run.run_id === state.selected ? " selected" : ""), "data-run-id": run.run_id });
  item.append(el("span", { class: "badge " + run.status }, run.status));
  item.append(el("strong", {}, config.provider || "?"));
  item.append(el("span", { class: "meta" }, new Date(run.created_at).toLocaleString() + " · " + duration(run)));
  const snippet = firstPrompt(run.run_id) || run.prompt;
  if (snippet) item.append(el("span", { class: "snippet" }, snippet.length > 80 ? snippet.slice(0, 80) + "…" : snippet));
  const where = [config.location || "local", config["daemon-id"], run.conversation_id || "no conversation"].filter(Boolean);
  item.append(el("span", { class: "meta" }, where.join(" · ")));
  const chosen = [config.model && "model " + config.model, config.mode && "mode " + config.mode].filter(Boolean);
  if (chosen.length) item.append(el("span", { class: "meta session" }, chosen.join(" · ")));
  item.append(el("code", { class: "run-id" }, run.run_id));
  item.onclick = () => openRun(run.run_id).catch((failure) => runError(failure));
  return item;
}

let listing = 0;
async function refreshRuns() {
  const mine = ++listing;
  const response = await api("/v1/runs?" + listQuery());
  if (mine !== listing) return; // a newer listing (page or filter) is under way
  if (!response.ok) throw new Error(await errorText(response));
  const body = await response.json();
  if (mine !== listing) return;
  const runs = body.runs.slice(0, PAGE);
  const list = $("runs"); list.textContent = "";
  for (const run of runs) list.append(runRow(run));
  $("runs-empty").hidden = runs.length > 0;
  $("runs-newer").disabled = state.pages.length === 0;
  $("runs-older").disabled = body.runs.length <= PAGE;
  $("runs-older").dataset.last = runs.length ? runs[runs.length - 1].run_id : "";
  $("runs-page").textContent = "page " + (state.pages.length + 1);
}

// Where a daemon is connected (its replica in a fleet), its jobs in flight and when it last sent a frame.
function daemonInfo(daemon) {
  const jobs = daemon.active_jobs || [];
  return [
    daemon.fenced ? (daemon.connected ? "connected" : "offline") : "",
    daemon.replica_id ? "replica " + daemon.replica_id : "",
    jobs.length ? "active jobs: " + jobs.join(", ") : "no active job",
    daemon.last_seen_at ? "last seen " + new Date(daemon.last_seen_at).toLocaleTimeString() : "",
  ].filter(Boolean).join(" · ");
}

async function refreshDaemons() {
  const response = await api("/v1/daemons");
  if (!response.ok) throw new Error(await errorText(response));
  const body = await response.json();
  const list = $("daemons"); list.textContent = "";
  for (const daemon of body.daemons) {
    const item = el("li", { class: "run daemon", "data-daemon-id": daemon.daemon_id });
    item.append(el("strong", {}, daemon.daemon_id));
    item.append(el("span", { class: "badge" + (daemon.fenced ? " failed" : " completed") }, daemon.fenced ? "fenced" : daemon.connected ? "connected" : "offline"));
    item.append(el("span", { class: "meta daemon-info" }, daemonInfo(daemon)));
    if (daemon.fenced) {
      const key = "daemon:" + daemon.daemon_id;
      const button = el("button", {}, "Unfence");
      button.onclick = () => {
        if (!confirm("Unfence " + daemon.daemon_id + "? Only do this once you checked no agent of it is still running.")) return;
        rowAction(key, button, () => api("/v1/daemons/" + encodeURIComponent(daemon.daemon_id) + "/unfence", { method: "POST", body: "{}" }), refreshDaemons);
      };
      item.append(button, rowError(key, button));
    }
    list.append(item);
  }
  $("daemons-empty").hidden = body.daemons.length > 0;
}

async function refreshAgents() {
  const response = await api("/v1/agents");
  if (response.status === 404) { $("agents-panel").hidden = true; return; }
  if (!response.ok) throw new Error(await errorText(response));
  const body = await response.json();
  const list = $("agents"); list.textContent = "";
  for (const agent of body.agents) {
    const item = el("li", { class: "run", "data-agent-id": agent.agent_id });
    item.append(el("strong", {}, agent.provider));
    item.append(el("span", { class: "meta agent-info" }, [agent.location, agent.conversation_id, agent.replica_id ? "replica " + agent.replica_id : "", "idle since " + new Date(agent.idle_since).toLocaleTimeString()].filter(Boolean).join(" · ")));
    const key = "agent:" + agent.agent_id;
    const stop = el("button", { class: "stop" }, "Stop");
    stop.onclick = () => rowAction(key, stop, () => api("/v1/agents/" + encodeURIComponent(agent.agent_id), { method: "DELETE" }), refreshAgents);
    item.append(stop, rowError(key, stop));
    list.append(item);
  }
  $("agents-empty").hidden = body.agents.length > 0;
}

// A row's button (Stop, Unfence) stays disabled while its request is under way, across
// the list's repaints, and the row shows why the last one failed.
function rowError(key, button) {
  button.disabled = state.rowBusy.has(key);
  return el("span", { class: "error row-error" }, state.rowErrors.get(key) || "");
}

async function rowAction(key, button, request, refresh) {
  if (state.rowBusy.has(key)) return;
  state.rowBusy.add(key); state.rowErrors.delete(key); button.disabled = true;
  const shown = button.parentNode && button.parentNode.querySelector(".row-error");
  if (shown) shown.textContent = "";
  try {
    const response = await request();
    if (!response.ok) state.rowErrors.set(key, await errorText(response));
  } catch (failure) {
    if (failure.message !== "unauthorized") state.rowErrors.set(key, "The request did not reach the runner (" + failure.message + ").");
  } finally { state.rowBusy.delete(key); }
  await refresh().catch(() => {});
  // The row is repainted from the list; a list that failed to load keeps this one.
  if (button.isConnected) { button.disabled = false; const node = button.parentNode.querySelector(".row-error"); if (node) node.textContent = state.rowErrors.get(key) || ""; }
}

function transcript() { return $("transcript"); }

function userBubble(text, who, attachments) {
  state.answer = null; state.thought = null;
  const bubble = el("div", { class: "bubble user" });
  bubble.append(el("div", { class: "who" }, who || "You"), el("div", { class: "text" }, text));
  const named = (attachments || []).map((a) => a.name + (a.mime_type ? " (" + a.mime_type + ")" : ""));
  if (named.length) bubble.append(el("div", { class: "meta attachments" }, "attached (not forwarded): " + named.join(", ")));
  transcript().append(bubble);
  return bubble;
}

// A follow-up this tab sent shows at once below the transcript, until its turn.started comes.
function addPending(text) {
  const node = el("div", { class: "bubble user pending" });
  node.append(el("div", { class: "who" }, "You · sending…"), el("div", { class: "text" }, text));
  $("pending").append(node);
  const pending = { text, node };
  state.pending.push(pending);
  return pending;
}
function dropPending(pending) {
  pending.node.remove();
  state.pending = state.pending.filter((p) => p !== pending);
}
function clearPending() { state.pending.forEach((p) => p.node.remove()); state.pending = []; }

function turnStarted(data) {
  const input = data.input || {};
  const text = typeof input.text === "string" ? input.text : "";
  const mine = state.pending.find((p) => p.text === text);
  if (mine) dropPending(mine);
  const bubble = userBubble(text, "Follow-up · turn " + data.turn, input.attachments);
  bubble.classList.add("follow-up");
}

function answerBlock() {
  if (state.answer) return state.answer;
  const node = el("div", { class: "bubble agent" });
  node.append(el("div", { class: "who" }, "Agent"), el("div", { class: "markdown" }));
  transcript().append(node);
  state.answer = { node, text: "", pending: false };
  return state.answer;
}

function paintAnswer(answer) {
  answer.pending = false;
  const body = answer.node.querySelector(".markdown");
  body.replaceChildren(renderMarkdown(answer.text));
}

function appendAnswer(text, whole) {
  state.thought = null;
  const answer = answerBlock();
  answer.text = whole === undefined ? answer.text + text : whole;
  if (!answer.pending) { answer.pending = true; requestAnimationFrame(() => paintAnswer(answer)); }
}

function appendThought(text) {
  if (!state.thought) {
    const node = el("details", { class: "thought" });
    node.append(el("summary", {}, "Thinking"), el("div", { class: "text" }));
    transcript().append(node);
    state.thought = node;
  }
  state.thought.querySelector(".text").textContent += text;
}

function pretty(value) {
  if (value === undefined || value === null) return "";
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

function toolCard(data) {
  state.answer = null; state.thought = null;
  let card = transcript().querySelector('.tool[data-tool-call-id="' + CSS.escape(data.tool_call_id) + '"]');
  if (card) return card;
  card = el("details", { class: "tool", "data-tool-call-id": data.tool_call_id });
  const summary = el("summary");
  summary.append(el("span", { class: "kind" }, data.kind || "tool"), el("span", { class: "title" }), el("span", { class: "badge status" }, "pending"));
  card.append(summary, el("div", { class: "where meta" }));
  card.append(el("div", { class: "label input-label", hidden: "" }, "Input"), el("pre", { class: "input", hidden: "" }));
  card.append(el("div", { class: "label output-label", hidden: "" }, "Output"), el("pre", { class: "output", hidden: "" }));
  transcript().append(card);
  return card;
}

// A one-hunk line diff: the common head and tail as context, the middle removed and added.
function diffLines(oldText, newText) {
  const a = (oldText || "").split("\n"); const b = (newText || "").split("\n");
  let head = 0; while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0; while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++;
  const lines = [];
  for (const line of a.slice(Math.max(0, head - 3), head)) lines.push([" ", line]);
  for (const line of a.slice(head, a.length - tail)) lines.push(["-", line]);
  for (const line of b.slice(head, b.length - tail)) lines.push(["+", line]);
  for (const line of a.slice(a.length - tail, Math.min(a.length, a.length - tail + 3))) lines.push([" ", line]);
  return lines;
}

function showDiffs(card, diffs) {
  let box = card.querySelector(".diffs");
  if (!box) { box = el("div", { class: "diffs" }); card.querySelector(".output-label").before(box); }
  box.textContent = "";
  for (const diff of diffs) {
    box.append(el("div", { class: "label" }, (diff.old_text === null ? "New file " : "Edit ") + diff.path));
    const pre = el("pre", { class: "diff" });
    for (const [sign, line] of diffLines(diff.old_text, diff.new_text)) {
      pre.append(el("span", { class: sign === "-" ? "del" : sign === "+" ? "add" : "ctx" }, sign + " " + line + "\n"));
    }
    box.append(pre);
  }
}

// No input ({} until a later update may bring it) shows no empty Input box.
function showInput(card, text) {
  const none = !text || text === "{}";
  card.querySelector(".input").textContent = none ? "" : text;
  card.querySelector(".input").hidden = none; card.querySelector(".input-label").hidden = none;
}

function updateTool(data, status) {
  const card = toolCard(data);
  if (data.tool_name) card.querySelector(".title").textContent = data.tool_name;
  if (data.kind) card.querySelector(".kind").textContent = data.kind;
  if (data.parameters !== undefined) showInput(card, pretty(data.parameters));
  if (data.locations) card.querySelector(".where").textContent = data.locations.map((l) => l.path + (l.line ? ":" + l.line : "")).join(", ");
  if (status) { const badge = card.querySelector(".status"); badge.textContent = status; badge.className = "badge status " + status; }
  if (Array.isArray(data.diffs)) showDiffs(card, data.diffs);
  if (Array.isArray(data.terminal_ids)) attachTerminals(card, data.terminal_ids);
  const output = data.error !== undefined ? data.error : data.result;
  if (output !== undefined) {
    card.querySelector(".output").textContent = pretty(output);
    card.querySelector(".output").hidden = false; card.querySelector(".output-label").hidden = false;
  }
}

// Terminals (ACP client terminals): each one's output streams into a monospace block,
// set as text only, inside the tool card whose latest terminal_ids names it, or a card of
// its own until one does. ANSI escapes and other control characters are stripped; the page
// keeps only the last TERMINAL_KEEP characters of each terminal.
const TERMINAL_KEEP = 256 * 1024;
const CONTROL = /\x1b\[[0-?]*[ -\/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]|\x9b[0-?]*[ -\/]*[@-~]|[\x00-\x08\x0b-\x1f\x7f-\x9f]/g;
const OPEN_ESCAPE = /(?:\x1b(?:\[[0-?]*[ -\/]*|\][^\x07\x1b]{0,256})?|\x9b[0-?]*[ -\/]*)$/;

function shellWord(word) {
  const text = String(word);
  return /^[\w@%+=:,.\/-]+$/.test(text) ? text : "'" + text.replace(/'/g, "'\\''") + "'";
}

function terminalRecord(id) {
  let term = state.terminals.get(id);
  if (term) return term;
  const block = el("div", { class: "terminal", "data-terminal-id": id });
  const head = el("div", { class: "terminal-head" });
  head.append(el("code", { class: "command" }, "terminal " + id), el("span", { class: "meta cwd" }));
  head.append(el("span", { class: "badge truncated", hidden: "" }, "truncated"));
  const pre = el("pre", { class: "terminal-output" });
  const cut = el("div", { class: "note terminal-cut", hidden: "" }, "Earlier output is not shown: the page keeps the last 256 KiB of it.");
  block.append(head, cut, pre, el("div", { class: "meta terminal-status" }, "running…"));
  term = { id, block, pre, tail: "", queued: [], queuedLength: 0, kept: 0, painting: false, cut: false, card: null, commandLine: "", follow: true };
  // The output follows its end unless the operator scrolled up (a moved block loses its scroll, not this).
  pre.addEventListener("scroll", () => { term.follow = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 8; });
  state.terminals.set(id, term);
  return term;
}

// A terminal no tool card shows yet gets a card of its own, where the run is now.
function placeTerminal(term) {
  if (term.block.isConnected) return;
  state.answer = null; state.thought = null;
  const card = el("details", { class: "tool terminal-card", open: "", "data-terminal-card": term.id });
  const summary = el("summary");
  summary.append(el("span", { class: "kind" }, "terminal"), el("span", { class: "title" }, term.commandLine || term.id));
  card.append(summary, term.block);
  transcript().append(card);
  term.card = card;
}

function attachTerminals(card, ids) {
  let box = card.querySelector(".terminals");
  if (!box) { box = el("div", { class: "terminals" }); card.querySelector(".output-label").before(box); }
  for (const id of ids) {
    const term = terminalRecord(String(id));
    if (term.block.parentNode === box) continue;
    box.append(term.block);
    if (term.card) { term.card.remove(); term.card = null; }
    card.open = true;
    if (term.follow) term.pre.scrollTop = term.pre.scrollHeight;
  }
}

function terminalStarted(data) {
  const term = terminalRecord(String(data.terminal_id));
  term.commandLine = [data.command].concat(Array.isArray(data.args) ? data.args : []).map(shellWord).join(" ");
  term.block.querySelector(".command").textContent = "$ " + term.commandLine;
  term.block.querySelector(".cwd").textContent = data.cwd === "." ? "in the workspace" : data.cwd ? "in " + data.cwd : "";
  placeTerminal(term);
  if (term.card) term.card.querySelector(".title").textContent = term.commandLine;
}

function markTruncated(term) { term.block.querySelector(".badge.truncated").hidden = false; }

// Text without escapes; an escape cut off at the end waits for the rest of it.
function cleanOutput(term, text) {
  let raw = term.tail + text;
  const open = raw.match(OPEN_ESCAPE);
  term.tail = open ? open[0] : "";
  if (open) raw = raw.slice(0, open.index);
  return raw.replace(/\r\n/g, "\n").replace(CONTROL, "");
}

function terminalOutput(data) {
  const term = terminalRecord(String(data.terminal_id));
  placeTerminal(term);
  if (data.truncated) markTruncated(term);
  const text = cleanOutput(term, typeof data.output === "string" ? data.output : "");
  if (!text) return;
  term.queued.push(text); term.queuedLength += text.length;
  if (term.queuedLength > 2 * TERMINAL_KEEP) { // a hidden tab paints nothing: keep the queue bounded
    term.queued = [term.queued.join("").slice(-TERMINAL_KEEP)]; term.queuedLength = TERMINAL_KEEP; term.cut = true;
  }
  if (!term.painting) { term.painting = true; requestAnimationFrame(() => paintTerminal(term)); }
}

// Appends what came since the last frame as text and drops the oldest text past the cap.
function paintTerminal(term) {
  term.painting = false;
  let text = term.queued.join(""); term.queued = []; term.queuedLength = 0;
  if (text.length > TERMINAL_KEEP) { text = text.slice(-TERMINAL_KEEP); term.cut = true; }
  const pre = term.pre;
  const last = pre.lastChild;
  if (last && last.length < 16384) last.appendData(text); else pre.append(document.createTextNode(text));
  term.kept += text.length;
  while (term.kept > TERMINAL_KEEP && pre.firstChild) {
    const first = pre.firstChild; const excess = term.kept - TERMINAL_KEEP;
    if (first.length <= excess) { term.kept -= first.length; first.remove(); }
    else { first.deleteData(0, excess); term.kept -= excess; }
    term.cut = true;
  }
  if (term.cut) term.block.querySelector(".terminal-cut").hidden = false;
  if (term.follow) pre.scrollTop = pre.scrollHeight;
}

function terminalExited(data) {
  const term = terminalRecord(String(data.terminal_id));
  placeTerminal(term);
  if (data.truncated) markTruncated(term);
  term.tail = ""; term.exited = true;
  const parts = [];
  if (data.timed_out) parts.push("timed out");
  if (typeof data.exit_code === "number") parts.push("exit code " + data.exit_code);
  if (data.signal) parts.push("killed by " + data.signal);
  const ok = data.exit_code === 0 && !data.signal && !data.timed_out;
  const status = term.block.querySelector(".terminal-status");
  status.textContent = "exited: " + (parts.join(" · ") || "no exit status");
  status.className = "meta terminal-status " + (ok ? "ok" : "failed");
}

function planCard(entries) {
  state.answer = null; state.thought = null;
  let card = transcript().querySelector(".plan:last-child");
  if (!card) { card = el("div", { class: "plan" }); transcript().append(card); }
  card.textContent = "";
  card.append(el("div", { class: "label" }, "Plan"));
  const list = el("ol");
  for (const entry of entries || []) list.append(el("li", { class: "plan-" + entry.status }, entry.status + ": " + entry.content));
  card.append(list);
}

function showUsage(usage) {
  if (!usage) return;
  const parts = [];
  if (usage.used !== undefined) parts.push(usage.used + (usage.size ? " / " + usage.size : "") + " tokens");
  if (usage.input_tokens !== undefined) parts.push(usage.input_tokens + " in · " + (usage.output_tokens || 0) + " out");
  if (usage.cost) parts.push(usage.cost.amount + " " + usage.cost.currency);
  if (parts.length) $("run-usage").textContent = "usage: " + parts.join(" · ");
}

function countdown(node, expiresAt, expired) {
  const tick = () => {
    const left = Math.max(0, Math.round((Date.parse(expiresAt) - Date.now()) / 1000));
    node.textContent = left > 0 ? "answer within " + (left >= 60 ? Math.floor(left / 60) + " min " : "") + (left % 60) + " s" : "timing out…";
    if (left <= 0 && node.isConnected) expired();
    if (left <= 0 || !node.isConnected) { clearInterval(timer); state.timers.delete(timer); }
  };
  const timer = setInterval(tick, 1000); state.timers.add(timer); tick();
}

function permissionCard(event) {
  state.answer = null; state.thought = null;
  const data = event.data; const call = data.tool_call || {};
  const card = el("div", { class: "permission", "data-request-id": data.request_id });
  card.append(el("strong", { class: "ask" }, "The agent asks: " + (call.title || "permission")));
  const where = (call.locations || []).map((l) => l.path).join(", ");
  if (call.kind || where) card.append(el("div", { class: "meta" }, [call.kind, where].filter(Boolean).join(" · ")));
  if (call.raw_input_summary) card.append(el("pre", { class: "input" }, call.raw_input_summary));
  const actions = el("div", { class: "actions" });
  const error = el("div", { class: "error answer-error", role: "alert" });
  const buttons = [];
  // At the timeout the fallback decides: an answer now could only come too late.
  let expired = false;
  const expire = () => { expired = true; buttons.forEach((b) => b.disabled = true); error.textContent = ""; };
  const left = data.expires_at ? card.appendChild(el("div", { class: "meta countdown" })) : null;
  const answer = (option) => async () => {
    if (expired) return;
    buttons.forEach((b) => b.disabled = true); error.textContent = "";
    let message;
    try {
      const response = await api("/v1/runs/" + encodeURIComponent(event.run_id) + "/permissions/" + encodeURIComponent(data.request_id), { method: "POST", body: JSON.stringify({ option_id: option.option_id }) });
      if (response.ok) return;
      message = await errorText(response);
      if (response.status === 409) { error.textContent = message; return; }
    } catch (failure) { message = "The answer did not reach the runner (" + failure.message + ")."; }
    error.textContent = message + " ";
    const retry = el("button", { class: "retry" }, "Retry");
    retry.onclick = () => { if (!expired) buttons.forEach((b) => b.disabled = false); error.textContent = ""; };
    error.append(retry);
  };
  for (const option of data.options || []) {
    const kind = option.kind || "";
    const button = el("button", { class: "option " + (kind.startsWith("allow") ? "approve" : "reject") + (kind.endsWith("always") ? " always" : ""), "data-option-id": option.option_id, "data-kind": kind }, option.name || option.option_id);
    button.onclick = answer(option);
    buttons.push(button); actions.append(button);
  }
  card.append(actions, error);
  transcript().append(card);
  // Only once the card is on the page: a countdown whose node is gone stops.
  if (left) countdown(left, data.expires_at, expire);
}

function permissionDecided(data) {
  const card = transcript().querySelector('.permission[data-request-id="' + CSS.escape(data.request_id) + '"]');
  const text = "Decided: " + data.decision + (data.option_id ? " (" + data.option_id + ")" : "") + " by " + data.by;
  if (!card) { transcript().append(el("div", { class: "note" }, "[permission] " + (data.title || "") + ": " + data.decision + " by " + data.by)); return; }
  card.classList.add("decided");
  card.querySelectorAll(".actions, .countdown, .answer-error").forEach((n) => n.remove());
  card.append(el("div", { class: "meta decision" }, text));
}

function showEvent(event) {
  const data = event.data || {};
  switch (event.type) {
    case "run.started": transcript().append(el("div", { class: "note sandbox" }, "Agent: " + (data.agent || "?") + " · sandbox: " + (data.sandbox || "off"))); break;
    case "turn.started": turnStarted(data); break;
    case "session.configured": transcript().append(el("div", { class: "note session" }, "[session] model " + (data.model || "—") + " · mode " + (data.mode || "—") + (data.by === "agent" ? " (changed by the agent)" : ""))); break;
    case "message.delta": appendAnswer((data.chunk && data.chunk.content) || ""); break;
    case "message.completed": if (data.message && typeof data.message.content === "string") appendAnswer("", data.message.content); state.answer = null; break;
    case "thought.delta": appendThought(data.content || ""); break;
    case "tool.call.started": updateTool(data, data.status || "pending"); break;
    case "tool.call.updated": updateTool(data, data.status); break;
    case "tool.call.completed": updateTool(data, data.error !== undefined ? "failed" : "completed"); break;
    case "terminal.started": terminalStarted(data); break;
    case "terminal.output": terminalOutput(data); break;
    case "terminal.exited": terminalExited(data); break;
    case "plan.updated": planCard(data.entries); break;
    case "usage.updated": showUsage(data); break;
    case "permission.requested": permissionCard(event); break;
    case "permission.decided": permissionDecided(data); break;
    case "run.completed": showUsage(event.usage); finished("completed"); break;
    case "run.failed": {
      transcript().append(el("div", { class: "error note" }, data.code + ": " + data.error));
      const unanswered = (data.unprocessed_inputs || []).map((input) => input.text);
      if (unanswered.length) transcript().append(el("div", { class: "note unprocessed" }, "Follow-ups not answered (send them again): " + unanswered.join(" · ")));
      finished(data.code === "run.cancelled" ? "cancelled" : "failed"); break;
    }
  }
}

// settled: the transcript holds the run's whole story (its terminal event was read, or the stream ended).
function setStatus(status, settled = false) {
  $("run-status").textContent = status; $("run-status").className = "badge " + status;
  $("run-status").dataset.settled = settled ? "yes" : "no";
  const active = status === "active";
  $("cancel").hidden = !active;
  $("follow-up-send").textContent = active ? "Send to the running turn" : "Send as a new run";
  // Follow-ups need a conversation: steering (POST …/input) and new runs both go by it.
  $("follow-up").hidden = !(state.run && state.run.conversation_id);
}

function finished(status) {
  state.answer = null; state.thought = null;
  clearPending();
  for (const term of state.terminals.values()) {
    if (!term.exited) term.block.querySelector(".terminal-status").textContent = "no exit status: the run ended";
  }
  setStatus(status, true);
  refreshRuns().catch(() => {});
}

const TERMINAL_TYPES = new Set(["run.completed", "run.failed"]);

/** Shows a stream's events from where it is; says whether the run's terminal event came. */
async function readEvents(response, stream, seen) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read().catch(() => ({ done: true }));
    if (done || state.stream !== stream) return false;
    buffer += value;
    let start = 0; let end;
    while ((end = buffer.indexOf("\n\n", start)) >= 0) {
      const block = buffer.slice(start, end); start = end + 2;
      const lines = block.split("\n");
      const data = lines.filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
      const id = lines.find((l) => l.startsWith("id:"));
      if (!data) continue;
      const event = JSON.parse(data);
      const sequence = id ? Number(id.slice(3).trim()) : event.sequence;
      if (Number.isInteger(sequence)) { if (sequence <= seen.after) continue; seen.after = sequence; }
      showEvent(event);
      if (TERMINAL_TYPES.has(event.type)) { reader.cancel().catch(() => {}); return true; }
    }
    buffer = buffer.slice(start);
  }
}

function pause(ms, signal) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => { clearTimeout(timer); resolve(); }, { once: true });
  });
}

function runError(failure) {
  if (failure && (failure.message === "unauthorized" || failure.name === "AbortError")) return;
  $("run-error").textContent = failure instanceof Error ? failure.message : String(failure);
}

/**
 * Follows the run's events until its terminal event: a stream that breaks (network,
 * proxy, replica restart) is read again from the last event shown (after=<id>).
 */
async function followEvents(runId, stream) {
  const seen = { after: 0 };
  let delay = 500;
  const path = "/v1/runs/" + encodeURIComponent(runId) + "/events?after=";
  for (;;) {
    let problem;
    try {
      const response = await api(path + seen.after, { signal: stream.signal, headers: headers({ accept: "text/event-stream" }) });
      if (state.stream !== stream) return;
      if (response.status === 204) { await settleStatus(runId, stream); return; }
      if (response.status === 200) {
        $("run-stream").textContent = "";
        const before = seen.after;
        if (await readEvents(response, stream, seen)) return;
        if (seen.after > before) delay = 500;
        problem = "the live stream was cut";
      } else {
        problem = await errorText(response);
        if (response.status < 500) { runError("The run's events could not be read: " + problem); return; }
      }
    } catch (failure) {
      if (state.stream !== stream || failure.message === "unauthorized") return;
      problem = failure.message;
    }
    if (state.stream !== stream) return;
    $("run-stream").textContent = "Reconnecting (" + problem + ")…";
    await pause(delay, stream.signal); delay = Math.min(delay * 2, 10000);
    if (state.stream !== stream) return;
  }
}

// The run ended with every event already shown: its record says how.
async function settleStatus(runId, stream) {
  $("run-stream").textContent = "";
  const response = await api("/v1/runs/" + encodeURIComponent(runId), { signal: stream.signal });
  if (state.stream !== stream || !response.ok) return;
  const run = await response.json();
  if (state.stream === stream && run.status !== "active") setStatus(run.status, true);
}

function showRunRecord(run) {
  state.run = run;
  const config = run.config || {};
  $("run-meta").textContent = [config.provider, config.location || "local", config["daemon-id"], config.workspace, run.conversation_id ? "conversation " + run.conversation_id : "no conversation", "started " + new Date(run.created_at).toLocaleString()].filter(Boolean).join(" · ");
  setStatus(run.status);
  showCarried();
  // The first prompt is the run's own input; each follow-up comes as a turn.started event.
  const prompt = run.prompt;
  const first = firstPrompt(run.run_id) || (prompt ? prompt + (prompt.length >= 200 ? "…" : "") : "");
  if (first) userBubble(first);
}

async function openRun(runId) {
  if (state.stream) state.stream.abort();
  state.timers.forEach((t) => clearInterval(t)); state.timers.clear();
  // Everything after an await checks it is still this stream: a newer openRun replaces it.
  const stream = new AbortController();
  state.selected = runId; state.stream = stream; state.run = null; state.answer = null; state.thought = null;
  state.terminals = new Map(); clearPending();
  saveHash();
  $("run-panel").hidden = false; $("run-title").textContent = runId; $("run-usage").textContent = ""; $("follow-up-error").textContent = "";
  $("run-meta").textContent = ""; $("run-error").textContent = ""; $("run-stream").textContent = "";
  setStatus("loading");
  transcript().textContent = "";
  document.querySelectorAll("li.run").forEach((li) => li.classList.toggle("selected", li.dataset.runId === runId));
  // On a phone the panel sits above the list: bring it into view.
  $("run-panel").scrollIntoView({ block: "start" });
  try {
    const record = await api("/v1/runs/" + encodeURIComponent(runId) + "?completions=lean", { signal: stream.signal });
    if (state.stream !== stream) return;
    if (!record.ok) { setStatus("unknown"); runError("The run could not be loaded: " + await errorText(record)); return; }
    const run = await record.json();
    if (state.stream !== stream) return;
    showRunRecord(run);
  } catch (failure) {
    if (state.stream !== stream) return;
    setStatus("unknown"); runError(failure.name === "AbortError" ? failure : new Error("The run could not be loaded (" + failure.message + ")."));
    return;
  }
  await followEvents(runId, stream);
}

/** Starts a run over the API and opens it; the console reads it through GET …/events. */
async function startRun(body, runId) {
  const response = await api("/v1/runs", { method: "POST", body: JSON.stringify(Object.assign({ run_id: runId }, body)) });
  if (!response.ok) throw new Error(await errorText(response));
  // Steered into the conversation's active run (202): its turn.started shows the text there.
  if (response.status === 202) return (await response.json()).run_id;
  rememberFirstPrompt(runId, body.input.text);
  response.body.cancel().catch(() => {});
  return runId;
}

function newRunId() { return "console-" + crypto.randomUUID(); }

/** Sends a follow-up into the running run; it shows as pending until its turn.started arrives. */
async function steer(text) {
  const pending = addPending(text);
  try {
    const response = await api("/v1/runs/" + encodeURIComponent(state.run.run_id) + "/input", { method: "POST", body: JSON.stringify({ input: { text } }) });
    if (!response.ok) throw new Error(await errorText(response));
    pending.node.querySelector(".who").textContent = "You · queued for the next turn";
  } catch (failure) { dropPending(pending); throw failure; }
}

// What a new run of the idle conversation takes over from the run shown: every key a caller
// may set, but not what the conversation remembers itself (model, mode, session config), the
// env-json values (the record shows only their names) or rules (refused over the operator's).
const NOT_CARRIED = new Set(["model", "mode", "session-config-json", "env-json", "permission-rules-json"]);
const CALLER_KEYS = new Set(JSON.parse(document.body.dataset.callerKeys || "[]"));

function carriedConfig() {
  const config = {};
  for (const [key, value] of Object.entries((state.run && state.run.config) || {})) {
    if (!CALLER_KEYS.has(key) || NOT_CARRIED.has(key) || value === undefined || value === null) continue;
    if (JSON.stringify(value).includes("[REDACTED]")) continue;
    config[key] = value;
  }
  return config;
}

function showCarried() {
  const list = $("follow-up-carried"); list.textContent = "";
  for (const [key, value] of Object.entries(carriedConfig())) list.append(el("li", {}, key + ": " + (typeof value === "string" ? value : JSON.stringify(value))));
}

async function sendFollowUp(event) {
  event.preventDefault();
  const send = $("follow-up-send");
  const text = $("follow-up-text").value.trim();
  if (!text || !state.run || send.disabled) return;
  $("follow-up-error").textContent = "";
  send.disabled = true;
  try {
    if ($("run-status").textContent === "active") {
      await steer(text);
    } else {
      const runId = await startRun({ conversation_id: state.run.conversation_id, input: { text }, config: carriedConfig() }, newRunId());
      openRun(runId).catch(runError);
    }
    $("follow-up-text").value = "";
  } catch (failure) { if (failure.message !== "unauthorized") $("follow-up-error").textContent = failure.message; }
  finally { send.disabled = false; }
}

async function cancelRun() {
  if (!state.run) return;
  $("cancel").disabled = true;
  try {
    const response = await api("/v1/runs/" + encodeURIComponent(state.run.run_id) + "/cancel", { method: "POST", body: "{}" });
    if (!response.ok) $("follow-up-error").textContent = await errorText(response);
  } catch (failure) { if (failure.message !== "unauthorized") $("follow-up-error").textContent = failure.message; }
  finally { $("cancel").disabled = false; }
}

async function loadProviders() {
  if (state.providers) return;
  const response = await api("/v1/providers");
  const names = response.ok ? (await response.json()).presets.map((p) => p.name) : [];
  state.providers = names.concat(["custom"]);
  const select = $("new-provider"); select.textContent = "";
  for (const name of state.providers) select.append(el("option", { value: name }, name));
}

function newRunBody() {
  const config = JSON.parse($("new-config").value.trim() || "{}");
  if (!config || typeof config !== "object" || Array.isArray(config)) throw new Error("Extra config must be a JSON object of run-config keys.");
  config.provider = $("new-provider").value;
  for (const [id, key] of [["new-workspace", "workspace"], ["new-model", "model"], ["new-mode", "mode"]]) {
    if ($(id).value.trim()) config[key] = $(id).value.trim();
  }
  if ($("new-permission").value) config["permission-decision"] = $("new-permission").value;
  const body = { input: { text: $("new-prompt").value }, config };
  if ($("new-conversation").value.trim()) body.conversation_id = $("new-conversation").value.trim();
  return body;
}

async function submitNewRun(event) {
  event.preventDefault();
  const submit = $("new-run-submit");
  if (submit.disabled) return;
  $("new-error").textContent = "";
  submit.disabled = true;
  // One run id per form: an attempt whose answer was lost and is sent again cannot start a second run.
  state.newRunId = state.newRunId || newRunId();
  try {
    const runId = await startRun(newRunBody(), state.newRunId);
    state.newRunId = null;
    $("new-run").hidden = true; $("new-prompt").value = "";
    await refreshRuns().catch(() => {});
    openRun(runId).catch(runError);
  } catch (failure) { if (failure.message !== "unauthorized") $("new-error").textContent = failure.message; }
  finally { submit.disabled = false; }
}

// The open run, the filters and the page live in the URL's fragment: a reload (or the
// images toggle, which reloads) comes back to them.
function saveHash() {
  const params = new URLSearchParams();
  if (state.selected) params.set("run", state.selected);
  for (const [key, value] of Object.entries(state.filters)) if (value) params.set(key, value);
  const before = state.pages[state.pages.length - 1];
  if (before) params.set("before", before);
  const hash = params.toString();
  history.replaceState(null, "", location.pathname + location.search + (hash ? "#" + hash : ""));
}

function restoreHash() {
  const params = new URLSearchParams(location.hash.slice(1));
  state.filters = { status: params.get("status") || "", conversation_id: params.get("conversation_id") || "", daemon_id: params.get("daemon_id") || "" };
  state.pages = params.get("before") ? [params.get("before")] : [];
  $("filter-status").value = state.filters.status; $("filter-conversation").value = state.filters.conversation_id; $("filter-daemon").value = state.filters.daemon_id;
  return params.get("run");
}

function changeList(change) { change(); saveHash(); loadPanel(PANELS[0]).catch(() => {}); }

function wireControls() {
  $("follow-up").onsubmit = sendFollowUp;
  $("cancel").onclick = cancelRun;
  $("new-run-open").onclick = () => { $("new-run").hidden = !$("new-run").hidden; loadProviders().catch(() => {}); };
  $("new-run").onsubmit = submitNewRun;
  $("new-run").oninput = () => { state.newRunId = null; };
  $("filters").onsubmit = (event) => {
    event.preventDefault();
    changeList(() => {
      state.filters = { status: $("filter-status").value, conversation_id: $("filter-conversation").value.trim(), daemon_id: $("filter-daemon").value.trim() };
      state.pages = [];
    });
  };
  $("runs-older").onclick = () => changeList(() => state.pages.push($("runs-older").dataset.last));
  $("runs-newer").onclick = () => changeList(() => state.pages.pop());
  $("back-to-runs").onclick = () => $("runs-panel").scrollIntoView({ block: "start" });
  $("images").checked = IMAGES;
  $("images").onchange = () => { location.assign(location.pathname + ($("images").checked ? "?images=1" : "") + location.hash); };
  $("page-retry").onclick = () => start();
  $("new-keys-list").textContent = [...CALLER_KEYS].join(", ");
}

// Each panel shows its own failure; the page lists them with a Retry.
const PANELS = [
  ["runs", "runs-error", () => refreshRuns()],
  ["daemons", "daemons-error", () => refreshDaemons()],
  ["warm agents", "agents-error", () => refreshAgents()],
];

async function loadPanel([, errorId, load]) {
  try { await load(); $(errorId).textContent = ""; }
  catch (failure) {
    if (failure.message !== "unauthorized") $(errorId).textContent = failure.message;
    throw failure;
  }
}

async function loadVersion() {
  const response = await fetch("/healthz");
  const health = await response.json().catch(() => ({}));
  if (health.version) $("version").textContent = "v" + health.version;
  if (!response.ok) throw new Error("HTTP " + response.status + (health.store && health.store.ok === false ? " (the store is unavailable)" : ""));
}

function showPageError(failed) {
  $("page-error").hidden = failed.length === 0;
  $("page-error-text").textContent = failed.length ? "Part of the console did not load: " + failed.join("; ") + "." : "";
}

async function loadAll(withVersion) {
  const parts = PANELS.map((panel) => [panel[0], () => loadPanel(panel)]);
  if (withVersion) parts.unshift(["/healthz", loadVersion]);
  const results = await Promise.allSettled(parts.map(([, load]) => load()));
  const refused = results.some((r) => r.status === "rejected" && r.reason && r.reason.message === "unauthorized");
  const failed = parts.flatMap(([name], i) => results[i].status === "rejected" ? [name + ": " + results[i].reason.message] : []);
  return { refused, failed };
}

// One poll at a time, none while signed out; a hidden tab skips its ticks, and the
// daemons and warm agents (which fan out to every replica of a fleet) are read every third.
function startPolling() { stopPolling(); state.poll = setInterval(tick, 1500); }
function stopPolling() { if (state.poll !== null) clearInterval(state.poll); state.poll = null; }

function tick() {
  if (document.hidden) return;
  const all = state.ticks++ % 3 === 0;
  const panels = all ? PANELS : PANELS.slice(0, 1);
  Promise.allSettled(panels.map(loadPanel)).then((results) => {
    if (all && results.every((r) => r.status === "fulfilled")) showPageError([]);
  });
}

async function start() {
  stopPolling();
  const opened = restoreHash();
  const { refused, failed } = await loadAll(true);
  if (refused) return;
  $("login").hidden = true; $("app").hidden = false; $("sign-out").hidden = false;
  showPageError(failed);
  startPolling();
  // Also after signing in again: a stream refused with the old token has stopped.
  if (opened) openRun(opened).catch(runError);
}

$("login").onsubmit = (event) => {
  event.preventDefault();
  state.token = $("token").value.trim();
  sessionStorage.setItem("runner-token", state.token);
  start();
};
$("sign-out").onclick = () => { sessionStorage.removeItem("runner-token"); state.token = ""; location.reload(); };
document.addEventListener("visibilitychange", () => { if (!document.hidden && state.poll !== null) tick(); });
wireControls();
start();
`;
