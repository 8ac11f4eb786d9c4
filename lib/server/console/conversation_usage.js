// @ts-check
/// <reference lib="dom" />
/**
 * The open run's conversation totals under the run's own usage: its runs'
 * tokens and costs added up, as `GET /v1/conversations/{id}` answers them
 * (`docs/http-api.md`). Read when the run opens and again when it ends.
 *
 * @module
 */

/** @import { Json } from "./state.js" */
import { api } from "./api.js";
import { $ } from "./dom.js";
import { state } from "./state.js";

/**
 * The totals as one line: runs, tokens, costs per currency.
 *
 * @param {Json} usage
 * @returns {string}
 */
function totalsText(usage) {
  const parts = [usage.runs + (usage.runs === 1 ? " run" : " runs")];
  if (usage.prompt_tokens !== undefined) {
    parts.push(
      usage.prompt_tokens + " prompt · " + (usage.completion_tokens || 0) +
        " completion" +
        (usage.total_tokens !== undefined
          ? " (" + usage.total_tokens + " total)"
          : ""),
    );
  }
  for (const cost of usage.costs || []) {
    parts.push(cost.amount + " " + cost.currency);
  }
  return "conversation: " + parts.join(" · ");
}

/**
 * Shows the open run's conversation totals (nothing for a run without a
 * conversation); a failed read leaves the line empty.
 */
export async function showConversationUsage() {
  const run = state.run;
  const line = $("conversation-usage");
  if (!run || !run.conversation_id) {
    line.textContent = "";
    return;
  }
  try {
    const response = await api(
      "/v1/conversations/" + encodeURIComponent(run.conversation_id),
    );
    if (state.run !== run) return; // another run opened meanwhile
    if (!response.ok) {
      line.textContent = "";
      return;
    }
    const conversation = await response.json();
    if (state.run !== run) return;
    line.textContent = conversation.usage
      ? totalsText(conversation.usage)
      : "conversation: no usage reported";
  } catch {
    if (state.run === run) line.textContent = "";
  }
}
