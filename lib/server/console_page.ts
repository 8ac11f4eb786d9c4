/**
 * The operator console's page: one HTML document with its style inline, the
 * import map of the libraries (`console_assets.ts`) and its entry module
 * (`console_modules.ts`), all served from the binary; no CDN, no build step.
 *
 * @module
 */

import { CONSOLE_IMPORT_MAP } from "./console_assets.ts";
import { CONSOLE_MODULE_PATH } from "./console_modules.ts";

const STYLE = `
*{box-sizing:border-box}
body{margin:0;font:15px/1.45 system-ui,sans-serif;color:#1d232a;background:#f4f5f7}
header{display:flex;gap:.75rem;align-items:center;padding:.6rem 1rem;background:#1d232a;color:#fff}
header h1{font-size:1.05rem;margin:0;flex:1}
header small{opacity:.75}
main{display:grid;grid-template-columns:minmax(300px,380px) minmax(0,1fr);gap:1rem;padding:1rem;max-width:1400px;margin:auto;align-items:start}
main>.side{display:flex;flex-direction:column;gap:1rem;min-width:0}
@media (max-width:800px){main{grid-template-columns:minmax(0,1fr);padding:.5rem;gap:.5rem}#run-panel{order:-1}.side{overflow-anchor:none}}
@media (min-width:801px){#back-to-runs{display:none}}
/* On a phone the list sits below the run: a growing transcript must not scroll to follow the list. */
#page-error{max-width:1400px;margin:.5rem auto 0;padding:.5rem 1rem}
#follow-up-settings{flex-basis:100%;font-size:.85rem}
li.run .row-error:empty{display:none}
section{background:#fff;border-radius:8px;padding:.75rem 1rem;box-shadow:0 1px 2px #0002;min-width:0}
section h2{font-size:1rem;margin:.2rem 0 .6rem;display:flex;flex-wrap:wrap;gap:.4rem;align-items:center}
button{font:inherit;border:0;border-radius:6px;padding:.45rem .8rem;cursor:pointer;background:#e3e6ea;white-space:nowrap;flex:0 0 auto}
button:disabled{opacity:.55;cursor:default}
button.approve{background:#1f7a3d;color:#fff}
button.reject{background:#b3261e;color:#fff}
button.always{outline:2px solid #0005;outline-offset:-4px}
button.primary{background:#2457c5;color:#fff}
input,select,textarea{font:inherit;padding:.45rem;border:1px solid #bbb;border-radius:6px;width:100%;min-width:0}
textarea{resize:vertical}
label{font-size:.85rem;color:#5b6570;display:block;margin-top:.4rem}
ul{list-style:none;margin:0;padding:0}
li.run{padding:.5rem;border-bottom:1px solid #eee;cursor:pointer;display:flex;flex-wrap:wrap;gap:.15rem .6rem;align-items:center}
li.run:hover,li.run.selected{background:#eef3fb}
li.run .snippet{flex-basis:100%;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.run-id{font-size:.75rem;color:#5b6570;overflow-wrap:anywhere}
.badge{font-size:.75rem;padding:.05rem .5rem;border-radius:10px;background:#ddd;white-space:nowrap}
.badge.active,.badge.in_progress,.badge.pending{background:#2457c5;color:#fff}
.badge.active::before{content:"";display:inline-block;width:.5rem;height:.5rem;border-radius:50%;background:#7fd1a0;margin-right:.3rem;vertical-align:middle}
.badge.completed{background:#d3f0dc}
.badge.failed,.badge.cancelled{background:#f6d6d3}
.meta{color:#5b6570;font-size:.85rem;overflow-wrap:anywhere}
.row{display:flex;flex-wrap:wrap;gap:.5rem;align-items:end}
.row>*{flex:1 1 8rem}
.row>button{flex:0 0 auto}
#filters{margin-bottom:.5rem}
.pager{display:flex;gap:.5rem;align-items:center;margin-top:.5rem}
#transcript{display:flex;flex-direction:column;gap:.6rem;margin:.6rem 0;overflow-wrap:anywhere}
.bubble{border-radius:10px;padding:.5rem .75rem;max-width:100%}
.bubble .who{font-size:.75rem;color:#5b6570;font-weight:600}
.bubble.user{background:#e8effc;align-self:flex-end;white-space:pre-wrap}
.bubble.agent{background:#f7f7f8}
#pending{display:flex;flex-direction:column;gap:.6rem;overflow-wrap:anywhere}
.bubble.pending{opacity:.7;border:1px dashed #2457c5}
.bubble .attachments{white-space:normal}
.terminal{margin:.3rem 0}
.terminal-head{display:flex;flex-wrap:wrap;gap:.2rem .5rem;align-items:center;font-size:.8rem}
.terminal-head code{font-family:ui-monospace,monospace;font-weight:600;overflow-wrap:anywhere}
pre.terminal-output{font-family:ui-monospace,monospace;max-height:24rem;overflow:auto;overflow-wrap:anywhere}
pre.terminal-output:empty{display:none}
.terminal-status.ok{color:#1f7a3d}.terminal-status.failed{color:#b3261e}
.markdown pre,pre{background:#1d232a;color:#e8eaed;padding:.5rem;border-radius:6px;overflow:auto;font-size:.8rem;white-space:pre-wrap;margin:.3rem 0}
.markdown code{font-family:ui-monospace,monospace;font-size:.85em}
.markdown p{margin:.3rem 0}
.markdown img{max-width:100%}
details{border:1px solid #dde1e6;border-radius:8px;padding:.35rem .6rem;background:#fff}
details>summary{cursor:pointer;display:flex;gap:.5rem;align-items:center;flex-wrap:wrap;list-style:none}
details>summary::before{content:"\\25B8";color:#5b6570}
details[open]>summary::before{content:"\\25BE"}
details.thought{color:#5b6570;font-style:italic}
details.thought .text{white-space:pre-wrap}
.tool .kind{font-size:.75rem;text-transform:uppercase;color:#5b6570}
.tool .title{font-weight:600;flex:1 1 8rem;min-width:0}
.label{font-size:.75rem;color:#5b6570;margin-top:.3rem}
.diff .del{color:#ffb4ab}.diff .add{color:#a6e3b4}.diff .ctx{color:#9aa4ae}
.plan{border-left:3px solid #2457c5;padding-left:.6rem}
.plan ol{margin:.2rem 0;padding-left:1.2rem}
.plan-completed{text-decoration:line-through;color:#5b6570}
.note{color:#5b6570;font-size:.85rem}
.permission{border:2px solid #e0a100;border-radius:8px;padding:.6rem;background:#fffaf0}
.permission.decided{border-color:#ccc;background:#fff}
.permission .actions{display:flex;flex-wrap:wrap;gap:.5rem;margin-top:.5rem}
.permission{overflow-wrap:anywhere;min-width:0}
.permission button{white-space:normal;max-width:100%;overflow-wrap:anywhere;text-align:left}
.permission pre{white-space:pre-wrap;overflow-wrap:anywhere}
.error{color:#b3261e;overflow-wrap:anywhere}
.error button{margin-left:.4rem}
#follow-up{display:flex;gap:.5rem;align-items:end;flex-wrap:wrap}
#follow-up textarea{flex:1 1 14rem}
#login{max-width:420px;margin:2rem auto;padding:0 .5rem}
[hidden]{display:none!important}
`;

const RUNS =
  `<section id="runs-panel"><h2>Runs <button id="new-run-open" class="primary" type="button">New run</button></h2>
<form id="new-run" hidden>
<label for="new-prompt">Prompt</label><textarea id="new-prompt" rows="3" required></textarea>
<div class="row">
<div><label for="new-provider">Provider</label><select id="new-provider"><option value="custom">custom</option></select></div>
<div><label for="new-conversation">Conversation</label><input id="new-conversation" placeholder="optional"></div>
</div>
<div class="row">
<div><label for="new-workspace">Workspace</label><input id="new-workspace" placeholder="the server's default"></div>
<div><label for="new-permission">Permission requests</label><select id="new-permission"><option value="">server default</option><option value="ask">ask me here</option><option value="allow">allow</option><option value="reject">reject</option></select></div>
</div>
<div class="row">
<div><label for="new-model">Model</label><input id="new-model" placeholder="the agent's default"></div>
<div><label for="new-mode">Mode</label><input id="new-mode" placeholder="the agent's default"></div>
</div>
<label for="new-config">More run config (JSON, the keys the caller policy allows)</label><textarea id="new-config" rows="2" placeholder='{"timeout": 600}'></textarea>
<details id="new-keys"><summary>Keys this server takes from a caller</summary><p id="new-keys-list" class="meta"></p></details>
<p class="row"><button id="new-run-submit" type="submit" class="primary">Start run</button></p>
<p id="new-error" class="error" role="alert"></p>
</form>
<form id="filters" class="row">
<div><label for="filter-status">Status</label><select id="filter-status"><option value="">any</option><option>active</option><option>completed</option><option>failed</option><option>cancelled</option></select></div>
<div><label for="filter-conversation">Conversation</label><input id="filter-conversation"></div>
<div><label for="filter-daemon">Daemon</label><input id="filter-daemon"></div>
<button type="submit">Filter</button>
</form>
<p id="runs-empty" class="meta">No runs.</p><p id="runs-error" class="error" role="alert"></p><ul id="runs"></ul>
<div class="pager"><button id="runs-newer" type="button">Newer</button><span id="runs-page" class="meta"></span><button id="runs-older" type="button">Older</button></div>
</section>`;

const RUN = `<section id="run-panel" hidden>
<h2><button id="back-to-runs" type="button">← Runs</button> Run <span id="run-status" class="badge"></span> <button id="cancel" class="reject" type="button" hidden>Cancel</button></h2>
<div id="run-title" class="run-id"></div><div id="run-meta" class="meta"></div><div id="run-usage" class="meta"></div><div id="conversation-usage" class="meta"></div>
<div class="meta">Transcript: <button id="download-md" type="button">Markdown</button> <button id="download-json" type="button">JSON</button> <span id="download-error" class="error" role="alert"></span></div>
<p id="run-error" class="error" role="alert"></p><div id="run-stream" class="meta" role="status"></div>
<div id="transcript"></div>
<div id="pending"></div>
<form id="follow-up" hidden><textarea id="follow-up-text" rows="2" placeholder="Follow-up message"></textarea><button id="follow-up-send" type="submit" class="primary">Send</button>
<details id="follow-up-settings"><summary>Settings a new run of this conversation takes (the conversation remembers its model, mode and session config)</summary><ul id="follow-up-carried" class="meta"></ul></details></form>
<p id="follow-up-error" class="error" role="alert"></p>
<label><input id="images" type="checkbox" class="inline"> load images from the agent's links</label>
</section>`;

/** What the page is made with besides its nonce. */
export interface ConsolePageOptions {
  /** The operator allowed images from agent URLs (`/?images=1`). */
  images?: boolean;
  /** Run-config keys a caller may set on this server (the form's hint). */
  callerKeys?: readonly string[];
}

/** Text for an HTML attribute or element. */
function escapeHtml(text: string): string {
  return text.replace(
    /[&<>"']/g,
    (c) => `&#${c.charCodeAt(0)};`,
  );
}

/**
 * The console's HTML; `nonce` allows its style, its import map and its
 * module script (and so the modules it imports) under the page's CSP.
 */
export function consolePage(
  nonce: string,
  options: ConsolePageOptions = {},
): string {
  const images = options.images ?? false;
  const keys = options.callerKeys ?? [];
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>runner console</title>
<link rel="icon" href="/favicon.ico">
<style nonce="${nonce}">${STYLE}#images{width:auto}</style>
<script type="importmap" nonce="${nonce}">${CONSOLE_IMPORT_MAP}</script>
</head>
<body data-images="${images ? "1" : "0"}" data-caller-keys="${
    escapeHtml(JSON.stringify(keys))
  }">
<header><h1>runner console</h1><small id="version"></small><button id="sign-out" type="button" hidden>Sign out</button></header>
<div id="page-error" class="error" role="alert" hidden><span id="page-error-text"></span> <button id="page-retry" type="button">Retry</button></div>
<form id="login" hidden><section>
<h2>Sign in</h2>
<p id="login-message" class="error"></p>
<label for="token">API token</label>
<input id="token" type="password" autocomplete="off" placeholder="the runner's API token">
<p class="meta">Open the console URL runner serve printed (it carries the token), or paste the token <code>runner token --show</code> prints.</p>
<p><button type="submit" class="primary">Open console</button></p>
</section></form>
<main id="app" hidden>
<div class="side">${RUNS}
<section id="agents-panel"><h2>Warm agents</h2><p id="agents-empty" class="meta">No agent is kept warm.</p><p id="agents-error" class="error" role="alert"></p><ul id="agents"></ul></section>
<section><h2>Daemons</h2><p id="daemons-empty" class="meta">No daemon connected or fenced.</p><p id="daemons-error" class="error" role="alert"></p><ul id="daemons"></ul></section>
</div>
${RUN}
</main>
<script type="module" nonce="${nonce}" src="${CONSOLE_MODULE_PATH}main.js"></script>
</body>
</html>`;
}
