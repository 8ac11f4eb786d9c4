// @ts-check
/// <reference lib="dom" />
/**
 * The open run's transcript, event by event: prompts and follow-ups, the
 * answer (Markdown, `markdown.js`), thoughts, tool cards, terminals,
 * permission cards, the plan, usage and the run's end. Every text but the
 * answer is set as text.
 *
 * @module
 */

/** @import { Json, Pending } from "./state.js" */
import { $, el, part, transcript } from "./dom.js";
import { renderMarkdown } from "./markdown.js";
import { permissionCard, permissionDecided } from "./permission_cards.js";
import { endBlocks, state } from "./state.js";
import {
  terminalExited,
  terminalOutput,
  terminalStarted,
} from "./terminals.js";
import { updateTool } from "./tool_cards.js";

/**
 * A prompt or follow-up as a bubble, with the names of its attachments.
 *
 * @param {string} text
 * @param {string} [who]
 * @param {Json[]} [attachments]
 * @returns {HTMLElement}
 */
export function userBubble(text, who, attachments) {
  endBlocks();
  const bubble = el("div", { class: "bubble user" });
  bubble.append(
    el("div", { class: "who" }, who || "You"),
    el("div", { class: "text" }, text),
  );
  const named = (attachments || []).map((a) =>
    a.name + (a.mime_type ? " (" + a.mime_type + ")" : "")
  );
  if (named.length) {
    bubble.append(
      el(
        "div",
        { class: "meta attachments" },
        "attached (not forwarded): " + named.join(", "),
      ),
    );
  }
  transcript().append(bubble);
  return bubble;
}

/**
 * A follow-up this tab sent shows at once below the transcript, until its
 * `turn.started` comes.
 *
 * @param {string} text
 * @returns {Pending}
 */
export function addPending(text) {
  const node = el("div", { class: "bubble user pending" });
  node.append(
    el("div", { class: "who" }, "You · sending…"),
    el("div", { class: "text" }, text),
  );
  $("pending").append(node);
  const pending = { text, node };
  state.pending.push(pending);
  return pending;
}

/**
 * Takes a pending follow-up away.
 *
 * @param {Pending} pending
 */
export function dropPending(pending) {
  pending.node.remove();
  state.pending = state.pending.filter((p) => p !== pending);
}

/** Takes every pending follow-up away. */
export function clearPending() {
  state.pending.forEach((p) => p.node.remove());
  state.pending = [];
}

/** @param {Json} data */
function turnStarted(data) {
  const input = data.input || {};
  const text = typeof input.text === "string" ? input.text : "";
  const mine = state.pending.find((p) => p.text === text);
  if (mine) dropPending(mine);
  const bubble = userBubble(
    text,
    "Follow-up · turn " + data.turn,
    input.attachments,
  );
  bubble.classList.add("follow-up");
}

function answerBlock() {
  if (state.answer) return state.answer;
  const node = el("div", { class: "bubble agent" });
  node.append(
    el("div", { class: "who" }, "Agent"),
    el("div", { class: "markdown" }),
  );
  transcript().append(node);
  state.answer = { node, text: "", pending: false };
  return state.answer;
}

/** Answers with text not painted yet (a frame is asked for each). */
const unpainted = new Set();

/** @param {import("./state.js").Answer} answer */
function paintAnswer(answer) {
  if (!answer.pending) return;
  answer.pending = false;
  unpainted.delete(answer);
  part(answer.node, ".markdown").replaceChildren(renderMarkdown(answer.text));
}

/** Paints now what waits for the next frame: the transcript is about to be called whole. */
export function paintAnswersNow() {
  for (const answer of [...unpainted]) paintAnswer(answer);
}

/**
 * Adds to the answer (or replaces it with `whole`), painted at the next frame.
 *
 * @param {string} text
 * @param {string} [whole]
 */
function appendAnswer(text, whole) {
  state.thought = null;
  const answer = answerBlock();
  answer.text = whole === undefined ? answer.text + text : whole;
  if (!answer.pending) {
    answer.pending = true;
    unpainted.add(answer);
    requestAnimationFrame(() => paintAnswer(answer));
  }
}

/** @param {string} text */
function appendThought(text) {
  if (!state.thought) {
    const node = el("details", { class: "thought" });
    node.append(el("summary", {}, "Thinking"), el("div", { class: "text" }));
    transcript().append(node);
    state.thought = node;
  }
  part(state.thought, ".text").textContent += text;
}

/** @param {Json[] | undefined} entries */
function planCard(entries) {
  endBlocks();
  let card = transcript().querySelector(".plan:last-child");
  if (!card) {
    card = el("div", { class: "plan" });
    transcript().append(card);
  }
  card.textContent = "";
  card.append(el("div", { class: "label" }, "Plan"));
  const list = el("ol");
  for (const entry of entries || []) {
    list.append(
      el(
        "li",
        { class: "plan-" + entry.status },
        entry.status + ": " + entry.content,
      ),
    );
  }
  card.append(list);
}

/**
 * The run's usage so far, under its title.
 *
 * @param {Json | undefined} usage
 */
function showUsage(usage) {
  if (!usage) return;
  const parts = [];
  if (usage.used !== undefined) {
    parts.push(usage.used + (usage.size ? " / " + usage.size : "") + " tokens");
  }
  // The tokens the agent counted, in LangBot's names (docs/events.md).
  if (usage.prompt_tokens !== undefined) {
    parts.push(
      usage.prompt_tokens + " prompt · " + (usage.completion_tokens || 0) +
        " completion" +
        (usage.total_tokens !== undefined
          ? " (" + usage.total_tokens + " total)"
          : ""),
    );
  }
  if (usage.cost) parts.push(usage.cost.amount + " " + usage.cost.currency);
  if (parts.length) $("run-usage").textContent = "usage: " + parts.join(" · ");
}

/** @param {Json} data */
function runFailed(data) {
  transcript().append(
    el("div", { class: "error note" }, data.code + ": " + data.error),
  );
  const unanswered = (data.unprocessed_inputs || []).map((
    /** @type {Json} */ input,
  ) => input.text);
  if (unanswered.length) {
    transcript().append(
      el(
        "div",
        { class: "note unprocessed" },
        "Follow-ups not answered (send them again): " + unanswered.join(" · "),
      ),
    );
  }
  return data.code === "run.cancelled" ? "cancelled" : "failed";
}

/**
 * Shows one run event; for the run's terminal event, says how the run ended
 * (`completed`, `failed` or `cancelled`).
 *
 * @param {Json} event
 * @returns {string | undefined}
 */
export function showEvent(event) {
  const data = event.data || {};
  switch (event.type) {
    case "run.started":
      transcript().append(
        el(
          "div",
          { class: "note sandbox" },
          "Agent: " + (data.agent || "?") + " · sandbox: " +
            (data.sandbox || "off"),
        ),
      );
      break;
    case "turn.started":
      turnStarted(data);
      break;
    case "session.configured":
      transcript().append(
        el(
          "div",
          { class: "note session" },
          "[session] model " + (data.model || "—") + " · mode " +
            (data.mode || "—") +
            (data.by === "agent" ? " (changed by the agent)" : ""),
        ),
      );
      break;
    case "message.delta":
      appendAnswer((data.chunk && data.chunk.content) || "");
      break;
    case "message.completed":
      if (data.message && typeof data.message.content === "string") {
        appendAnswer("", data.message.content);
      }
      state.answer = null;
      break;
    case "thought.delta":
      appendThought(data.content || "");
      break;
    case "tool.call.started":
      updateTool(data, data.status || "pending");
      break;
    case "tool.call.updated":
      updateTool(data, data.status);
      break;
    case "tool.call.completed":
      updateTool(data, data.error !== undefined ? "failed" : "completed");
      break;
    case "terminal.started":
      terminalStarted(data);
      break;
    case "terminal.output":
      terminalOutput(data);
      break;
    case "terminal.exited":
      terminalExited(data);
      break;
    case "plan.updated":
      planCard(data.entries);
      break;
    case "usage.updated":
      showUsage(data);
      break;
    case "permission.requested":
      permissionCard(event);
      break;
    case "permission.decided":
      permissionDecided(data);
      break;
    case "run.completed":
      showUsage(event.usage);
      return "completed";
    case "run.failed":
      showUsage(event.usage); // what was counted before the failure
      return runFailed(data);
  }
  return undefined;
}
