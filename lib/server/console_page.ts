/**
 * The operator console's page: one HTML document with its style and script
 * inline, served from the binary (no CDN, no framework, no build step). It
 * talks to the same `/v1` API as any client, with the bearer token a person
 * types once (kept in the tab's session storage, never in a URL).
 *
 * @module
 */

const STYLE = `
*{box-sizing:border-box}
body{margin:0;font:15px/1.4 system-ui,sans-serif;color:#1d232a;background:#f4f5f7}
header{display:flex;gap:.75rem;align-items:center;padding:.6rem 1rem;background:#1d232a;color:#fff}
header h1{font-size:1.05rem;margin:0;flex:1}
header small{opacity:.75}
main{display:flex;flex-wrap:wrap;gap:1rem;padding:1rem;max-width:1200px;margin:auto}
section{background:#fff;border-radius:8px;padding:.75rem 1rem;box-shadow:0 1px 2px #0002;flex:1 1 340px;min-width:0}
section h2{font-size:1rem;margin:.2rem 0 .6rem}
button{font:inherit;border:0;border-radius:6px;padding:.45rem .8rem;cursor:pointer;background:#e3e6ea}
button.approve{background:#1f7a3d;color:#fff}
button.reject{background:#b3261e;color:#fff}
input{font:inherit;padding:.45rem;border:1px solid #bbb;border-radius:6px;width:100%}
ul{list-style:none;margin:0;padding:0}
li.run{padding:.5rem;border-bottom:1px solid #eee;cursor:pointer;display:flex;flex-wrap:wrap;gap:.25rem .6rem}
li.run:hover,li.run.selected{background:#eef3fb}
.badge{font-size:.75rem;padding:.05rem .45rem;border-radius:10px;background:#ddd}
.badge.active{background:#cfe3ff}.badge.completed{background:#d3f0dc}
.badge.failed,.badge.cancelled{background:#f6d6d3}
.meta{color:#5b6570;font-size:.85rem}
#transcript{white-space:pre-wrap;word-break:break-word;font-family:ui-monospace,monospace;font-size:.85rem}
.tool,.plan,.note{color:#5b6570}
.permission{border:2px solid #e0a100;border-radius:8px;padding:.5rem;margin:.5rem 0;font-family:system-ui,sans-serif;white-space:normal}
.permission.decided{border-color:#ccc}
.permission .actions{display:flex;gap:.5rem;margin-top:.4rem}
.error{color:#b3261e}
#login{max-width:420px;margin:2rem auto}
[hidden]{display:none!important}
`;

const SCRIPT = `
"use strict";
const $ = (id) => document.getElementById(id);
const state = { token: sessionStorage.getItem("runner-token") || "", selected: null, stream: null };

function headers(extra) {
  const h = Object.assign({ "content-type": "application/json" }, extra || {});
  if (state.token) h.authorization = "Bearer " + state.token;
  return h;
}

async function api(path, options) {
  const response = await fetch(path, Object.assign({ headers: headers() }, options || {}));
  if (response.status === 401) { showLogin("This runner needs its API token."); throw new Error("unauthorized"); }
  return response;
}

function showLogin(message) {
  $("login").hidden = false; $("app").hidden = true;
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

async function refreshRuns() {
  const body = await (await api("/v1/runs?limit=50")).json();
  const list = $("runs"); list.textContent = "";
  for (const run of body.runs) {
    const item = el("li", { class: "run" + (run.run_id === state.selected ? " selected" : ""), "data-run-id": run.run_id });
    item.append(el("span", { class: "badge " + run.status }, run.status));
    item.append(el("strong", {}, (run.config && run.config.provider) || "?"));
    item.append(el("span", { class: "meta" }, ((run.config && run.config.location) || "local") + " · " + (run.conversation_id || "no conversation") + " · " + duration(run)));
    item.onclick = () => openRun(run.run_id);
    list.append(item);
  }
  $("runs-empty").hidden = body.runs.length > 0;
}

async function refreshDaemons() {
  const body = await (await api("/v1/daemons")).json();
  const list = $("daemons"); list.textContent = "";
  for (const daemon of body.daemons) {
    const item = el("li", { class: "run" });
    item.append(el("strong", {}, daemon.daemon_id));
    item.append(el("span", { class: "badge" + (daemon.fenced ? " failed" : " completed") }, daemon.fenced ? "fenced" : daemon.connected ? "connected" : "offline"));
    if (daemon.fenced) {
      const button = el("button", {}, "Unfence");
      button.onclick = async () => {
        if (!confirm("Unfence " + daemon.daemon_id + "? Only do this once you checked no agent of it is still running.")) return;
        await api("/v1/daemons/" + encodeURIComponent(daemon.daemon_id) + "/unfence", { method: "POST", body: "{}" });
        refreshDaemons();
      };
      item.append(button);
    }
    list.append(item);
  }
  $("daemons-empty").hidden = body.daemons.length > 0;
}

async function refreshAgents() {
  const response = await api("/v1/agents");
  if (!response.ok) { $("agents-panel").hidden = true; return; }
  const body = await response.json();
  const list = $("agents"); list.textContent = "";
  for (const agent of body.agents) {
    const item = el("li", { class: "run", "data-agent-id": agent.agent_id });
    item.append(el("strong", {}, agent.provider));
    item.append(el("span", { class: "meta" }, agent.location + " · " + agent.conversation_id + " · idle since " + new Date(agent.idle_since).toLocaleTimeString()));
    const stop = el("button", {}, "Stop");
    stop.onclick = async () => {
      await api("/v1/agents/" + encodeURIComponent(agent.agent_id), { method: "DELETE" });
      refreshAgents();
    };
    item.append(stop);
    list.append(item);
  }
  $("agents-empty").hidden = body.agents.length > 0;
}

function appendText(text, cls) {
  const transcript = $("transcript");
  const last = transcript.lastChild;
  if (!cls && last && last.nodeType === 3) { last.textContent += text; return; }
  if (!cls) { transcript.append(document.createTextNode(text)); return; }
  transcript.append(el("div", { class: cls }, text));
}

function permissionCard(event) {
  const data = event.data; const call = data.tool_call || {};
  const card = el("div", { class: "permission", "data-request-id": data.request_id });
  card.append(el("strong", {}, "The agent asks: " + (call.title || "permission")));
  const where = (call.locations || []).map((l) => l.path).join(", ");
  if (call.kind || where) card.append(el("div", { class: "meta" }, [call.kind, where].filter(Boolean).join(" · ")));
  if (call.raw_input_summary) card.append(el("code", {}, call.raw_input_summary));
  const actions = el("div", { class: "actions" });
  const answer = (decision) => async () => {
    actions.querySelectorAll("button").forEach((b) => b.disabled = true);
    const response = await api("/v1/runs/" + event.run_id + "/permissions/" + data.request_id, { method: "POST", body: JSON.stringify({ decision }) });
    if (!response.ok) { actions.append(el("span", { class: "error" }, (await response.json()).error.message)); }
  };
  const approve = el("button", { class: "approve" }, "Approve"); approve.onclick = answer("allow_once");
  const reject = el("button", { class: "reject" }, "Reject"); reject.onclick = answer("reject_once");
  actions.append(approve, reject); card.append(actions);
  $("transcript").append(card);
}

function showEvent(event) {
  const data = event.data || {};
  switch (event.type) {
    case "message.delta": appendText((data.chunk && data.chunk.content) || ""); break;
    case "tool.call.started": appendText("[tool] " + (data.tool_name || ""), "tool"); break;
    case "plan.updated": appendText("[plan] " + (data.entries || []).map((e) => e.status + ": " + e.content).join("; "), "plan"); break;
    case "permission.requested": permissionCard(event); break;
    case "permission.decided": {
      const card = document.querySelector('.permission[data-request-id="' + data.request_id + '"]');
      const text = "Decided: " + data.decision + " (by " + data.by + ")";
      if (card) { card.classList.add("decided"); card.querySelector(".actions").replaceWith(el("div", { class: "meta decision" }, text)); }
      else appendText("[permission] " + (data.title || "") + ": " + data.decision, "note");
      break;
    }
    case "session.configured": appendText("[session] model " + (data.model || "—") + " · mode " + (data.mode || "—") + (data.by === "agent" ? " (changed by the agent)" : ""), "note"); break;
    case "run.completed": appendText("— completed", "note"); finished("completed"); break;
    case "run.failed": appendText("— " + data.code + ": " + data.error, "error"); finished("failed"); break;
  }
}

function finished(status) {
  $("run-status").textContent = status; $("run-status").className = "badge " + status;
  refreshRuns().catch(() => {});
}

async function openRun(runId) {
  if (state.stream) state.stream.abort();
  state.selected = runId; state.stream = new AbortController();
  $("run-panel").hidden = false; $("run-title").textContent = runId; $("run-status").textContent = "";
  $("transcript").textContent = "";
  document.querySelectorAll("li.run").forEach((li) => li.classList.toggle("selected", li.dataset.runId === runId));
  const response = await api("/v1/runs/" + runId + "/events", { signal: state.stream.signal, headers: headers({ accept: "text/event-stream" }) });
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read().catch(() => ({ done: true }));
    if (done) break;
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\\n\\n")) >= 0) {
      const block = buffer.slice(0, end); buffer = buffer.slice(end + 2);
      const data = block.split("\\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\\n");
      if (data) showEvent(JSON.parse(data));
    }
  }
}

async function start() {
  try {
    const health = await (await fetch("/healthz")).json();
    $("version").textContent = "v" + health.version;
    await refreshRuns(); await refreshDaemons(); await refreshAgents();
    $("login").hidden = true; $("app").hidden = false;
  } catch (error) { if (error.message !== "unauthorized") throw error; return; }
  setInterval(() => { refreshRuns().catch(() => {}); refreshDaemons().catch(() => {}); refreshAgents().catch(() => {}); }, 1500);
}

$("login").onsubmit = (event) => {
  event.preventDefault();
  state.token = $("token").value.trim();
  sessionStorage.setItem("runner-token", state.token);
  start();
};
$("sign-out").onclick = () => { sessionStorage.removeItem("runner-token"); state.token = ""; location.reload(); };
start();
`;

/** The console's HTML; `nonce` allows its inline script under the page's CSP. */
export function consolePage(nonce: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>runner console</title>
<style nonce="${nonce}">${STYLE}</style>
</head>
<body>
<header><h1>runner console</h1><small id="version"></small><button id="sign-out">Sign out</button></header>
<form id="login" hidden><section>
<h2>Sign in</h2>
<p id="login-message" class="error"></p>
<label for="token">API token</label>
<input id="token" type="password" autocomplete="off" placeholder="the runner's API token">
<p><button type="submit">Open console</button></p>
</section></form>
<main id="app" hidden>
<section><h2>Runs</h2><p id="runs-empty" class="meta">No runs yet.</p><ul id="runs"></ul></section>
<section id="run-panel" hidden><h2>Run <span id="run-title" class="meta"></span> <span id="run-status" class="badge"></span></h2><div id="transcript"></div></section>
<section id="agents-panel"><h2>Warm agents</h2><p id="agents-empty" class="meta">No agent is kept warm.</p><ul id="agents"></ul></section>
<section><h2>Daemons</h2><p id="daemons-empty" class="meta">No daemon connected or fenced.</p><ul id="daemons"></ul></section>
</main>
<script nonce="${nonce}">${SCRIPT}</script>
</body>
</html>`;
}
