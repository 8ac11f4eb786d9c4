// @ts-check
/// <reference lib="dom" />
/**
 * Tool calls as collapsible cards: kind, title, status, where, the input, the
 * diffs of an edit, the terminals it runs and the output; all set as text.
 *
 * @module
 */

/** @import { Json } from "./state.js" */
import { el, part, pretty, transcript } from "./dom.js";
import { endBlocks } from "./state.js";
import { attachTerminals } from "./terminals.js";

/**
 * The card of this tool call, made on first sight.
 *
 * @param {Json} data
 * @returns {HTMLDetailsElement}
 */
function toolCard(data) {
  endBlocks();
  const known = transcript().querySelector(
    '.tool[data-tool-call-id="' + CSS.escape(data.tool_call_id) + '"]',
  );
  if (known instanceof HTMLDetailsElement) return known;
  const card = el("details", {
    class: "tool",
    "data-tool-call-id": data.tool_call_id,
  });
  const summary = el("summary");
  summary.append(
    el("span", { class: "kind" }, data.kind || "tool"),
    el("span", { class: "title" }),
    el("span", { class: "badge status" }, "pending"),
  );
  card.append(summary, el("div", { class: "where meta" }));
  card.append(
    el("div", { class: "label input-label", hidden: "" }, "Input"),
    el("pre", { class: "input", hidden: "" }),
  );
  card.append(
    el("div", { class: "label output-label", hidden: "" }, "Output"),
    el("pre", { class: "output", hidden: "" }),
  );
  transcript().append(card);
  return card;
}

/**
 * A one-hunk line diff: the common head and tail as context, the middle
 * removed and added.
 *
 * @param {string | null | undefined} oldText
 * @param {string | null | undefined} newText
 * @returns {Array<[string, string]>} Each line with its sign: `" "`, `"-"` or `"+"`.
 */
export function diffLines(oldText, newText) {
  const a = (oldText || "").split("\n");
  const b = (newText || "").split("\n");
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (
    tail < a.length - head && tail < b.length - head &&
    a[a.length - 1 - tail] === b[b.length - 1 - tail]
  ) tail++;
  /** @type {Array<[string, string]>} */
  const lines = [];
  for (const line of a.slice(Math.max(0, head - 3), head)) {
    lines.push([" ", line]);
  }
  for (const line of a.slice(head, a.length - tail)) lines.push(["-", line]);
  for (const line of b.slice(head, b.length - tail)) lines.push(["+", line]);
  for (
    const line of a.slice(
      a.length - tail,
      Math.min(a.length, a.length - tail + 3),
    )
  ) lines.push([" ", line]);
  return lines;
}

/**
 * @param {HTMLElement} card
 * @param {Json[]} diffs
 */
function showDiffs(card, diffs) {
  let box = card.querySelector(".diffs");
  if (!box) {
    box = el("div", { class: "diffs" });
    part(card, ".output-label").before(box);
  }
  box.textContent = "";
  for (const diff of diffs) {
    box.append(
      el(
        "div",
        { class: "label" },
        (diff.old_text === null ? "New file " : "Edit ") + diff.path,
      ),
    );
    const pre = el("pre", { class: "diff" });
    for (const [sign, line] of diffLines(diff.old_text, diff.new_text)) {
      pre.append(
        el("span", {
          class: sign === "-" ? "del" : sign === "+" ? "add" : "ctx",
        }, sign + " " + line + "\n"),
      );
    }
    box.append(pre);
  }
}

/**
 * No input (`{}` until a later update may bring it) shows no empty Input box.
 *
 * @param {HTMLElement} card
 * @param {string} text
 */
function showInput(card, text) {
  const none = !text || text === "{}";
  part(card, ".input").textContent = none ? "" : text;
  part(card, ".input").hidden = none;
  part(card, ".input-label").hidden = none;
}

/**
 * `tool.call.*`: the card of the call, updated with what the event brings.
 *
 * @param {Json} data
 * @param {string} [status]
 */
export function updateTool(data, status) {
  const card = toolCard(data);
  if (data.tool_name) part(card, ".title").textContent = data.tool_name;
  if (data.kind) part(card, ".kind").textContent = data.kind;
  if (data.parameters !== undefined) showInput(card, pretty(data.parameters));
  if (data.locations) {
    part(card, ".where").textContent = data.locations.map((
      /** @type {Json} */ l,
    ) => l.path + (l.line ? ":" + l.line : "")).join(", ");
  }
  if (status) {
    const badge = part(card, ".status");
    badge.textContent = status;
    badge.className = "badge status " + status;
  }
  if (Array.isArray(data.diffs)) showDiffs(card, data.diffs);
  if (Array.isArray(data.terminal_ids)) {
    attachTerminals(card, data.terminal_ids);
  }
  const output = data.error !== undefined ? data.error : data.result;
  if (output !== undefined) {
    part(card, ".output").textContent = pretty(output);
    part(card, ".output").hidden = false;
    part(card, ".output-label").hidden = false;
  }
}
