/**
 * The operator console's own code: the browser modules of `console/`
 * (JavaScript checked by `deno check`, `// @ts-check` with JSDoc types, and
 * covered by `deno lint` and `deno fmt`), served as they are under
 * {@linkcode CONSOLE_MODULE_PATH}. They are text imports, so they are part of
 * the module graph and `deno compile` embeds them in the binary; serving them
 * needs no build step. The page loads `main.js`, which imports the others.
 *
 * @module
 */

import apiSource from "./console/api.js" with { type: "text" };
import carriedSource from "./console/carried.js" with { type: "text" };
import conversationUsageSource from "./console/conversation_usage.js" with {
  type: "text",
};
import domSource from "./console/dom.js" with { type: "text" };
import downloadSource from "./console/download.js" with { type: "text" };
import followUpSource from "./console/follow_up.js" with { type: "text" };
import listsSource from "./console/lists.js" with { type: "text" };
import mainSource from "./console/main.js" with { type: "text" };
import markdownSource from "./console/markdown.js" with { type: "text" };
import newRunSource from "./console/new_run.js" with { type: "text" };
import permissionCardsSource from "./console/permission_cards.js" with {
  type: "text",
};
import runEventsSource from "./console/run_events.js" with { type: "text" };
import runStatusSource from "./console/run_status.js" with { type: "text" };
import runViewSource from "./console/run_view.js" with { type: "text" };
import stateSource from "./console/state.js" with { type: "text" };
import terminalsSource from "./console/terminals.js" with { type: "text" };
import toolCardsSource from "./console/tool_cards.js" with { type: "text" };
import transcriptSource from "./console/transcript.js" with { type: "text" };
import urlStateSource from "./console/url_state.js" with { type: "text" };

/** Where the console's modules are served: `/console/app/<file>`. */
export const CONSOLE_MODULE_PATH = "/console/app/";

/** The console's modules by file name, their text as served. */
export const CONSOLE_MODULES: Readonly<Record<string, string>> = {
  "api.js": apiSource,
  "carried.js": carriedSource,
  "conversation_usage.js": conversationUsageSource,
  "dom.js": domSource,
  "download.js": downloadSource,
  "follow_up.js": followUpSource,
  "lists.js": listsSource,
  "main.js": mainSource,
  "markdown.js": markdownSource,
  "new_run.js": newRunSource,
  "permission_cards.js": permissionCardsSource,
  "run_events.js": runEventsSource,
  "run_status.js": runStatusSource,
  "run_view.js": runViewSource,
  "state.js": stateSource,
  "terminals.js": terminalsSource,
  "tool_cards.js": toolCardsSource,
  "transcript.js": transcriptSource,
  "url_state.js": urlStateSource,
};
