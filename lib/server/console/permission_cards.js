// @ts-check
/// <reference lib="dom" />
/**
 * Permission requests (`permission-decision=ask`): a card with every option
 * the agent offered, the time left before the fallback decides, and the
 * error of an answer that did not get through, with a Retry.
 *
 * @module
 */

/** @import { Json } from "./state.js" */
import { api, errorText, messageOf } from "./api.js";
import { el, transcript } from "./dom.js";
import { endBlocks, state } from "./state.js";

/**
 * Counts down to `expiresAt` in `node`; calls `expired` once the time is up.
 * Stops once the node is gone from the page.
 *
 * @param {HTMLElement} node
 * @param {string} expiresAt
 * @param {() => void} expired
 */
function countdown(node, expiresAt, expired) {
  const tick = () => {
    const left = Math.max(
      0,
      Math.round((Date.parse(expiresAt) - Date.now()) / 1000),
    );
    node.textContent = left > 0
      ? "answer within " + (left >= 60 ? Math.floor(left / 60) + " min " : "") +
        (left % 60) + " s"
      : "timing out…";
    if (left <= 0 && node.isConnected) expired();
    if (left <= 0 || !node.isConnected) {
      clearInterval(timer);
      state.timers.delete(timer);
    }
  };
  const timer = setInterval(tick, 1000);
  state.timers.add(timer);
  tick();
}

/**
 * The card's head: what the agent asks, its kind and where, its input.
 *
 * @param {HTMLElement} card
 * @param {Json} call
 */
function askHead(card, call) {
  card.append(
    el(
      "strong",
      { class: "ask" },
      "The agent asks: " + (call.title || "permission"),
    ),
  );
  const where = (call.locations || []).map((/** @type {Json} */ l) => l.path)
    .join(", ");
  if (call.kind || where) {
    card.append(
      el(
        "div",
        { class: "meta" },
        [call.kind, where].filter(Boolean).join(" · "),
      ),
    );
  }
  if (call.raw_input_summary) {
    card.append(el("pre", { class: "input" }, call.raw_input_summary));
  }
}

/**
 * `permission.requested`: a card with a button for each option.
 *
 * @param {Json} event
 */
export function permissionCard(event) {
  endBlocks();
  const data = event.data;
  const card = el("div", {
    class: "permission",
    "data-request-id": data.request_id,
  });
  askHead(card, data.tool_call || {});
  const actions = el("div", { class: "actions" });
  const error = el("div", { class: "error answer-error", role: "alert" });
  /** @type {HTMLButtonElement[]} */
  const buttons = [];
  // At the timeout the fallback decides: an answer now could only come too late.
  let expired = false;
  const expire = () => {
    expired = true;
    buttons.forEach((b) => b.disabled = true);
    error.textContent = "";
  };
  const left = data.expires_at
    ? card.appendChild(el("div", { class: "meta countdown" }))
    : null;
  /** @param {Json} option */
  const answer = (option) => async () => {
    if (expired) return;
    buttons.forEach((b) => b.disabled = true);
    error.textContent = "";
    let message;
    try {
      const response = await api(
        "/v1/runs/" + encodeURIComponent(event.run_id) + "/permissions/" +
          encodeURIComponent(data.request_id),
        {
          method: "POST",
          body: JSON.stringify({ option_id: option.option_id }),
        },
      );
      if (response.ok) return;
      message = await errorText(response);
      if (response.status === 409) {
        error.textContent = message;
        return;
      }
    } catch (failure) {
      message = "The answer did not reach the runner (" + messageOf(failure) +
        ").";
    }
    error.textContent = message + " ";
    const retry = el("button", { class: "retry" }, "Retry");
    retry.onclick = () => {
      if (!expired) buttons.forEach((b) => b.disabled = false);
      error.textContent = "";
    };
    error.append(retry);
  };
  for (const option of data.options || []) {
    const kind = option.kind || "";
    const button = el("button", {
      class: "option " + (kind.startsWith("allow") ? "approve" : "reject") +
        (kind.endsWith("always") ? " always" : ""),
      "data-option-id": option.option_id,
      "data-kind": kind,
    }, option.name || option.option_id);
    button.onclick = answer(option);
    buttons.push(button);
    actions.append(button);
  }
  card.append(actions, error);
  transcript().append(card);
  // Only once the card is on the page: a countdown whose node is gone stops.
  if (left) countdown(left, data.expires_at, expire);
}

/**
 * `permission.decided`: the card says how, and takes no more answers.
 *
 * @param {Json} data
 */
export function permissionDecided(data) {
  const card = transcript().querySelector(
    '.permission[data-request-id="' + CSS.escape(data.request_id) + '"]',
  );
  const text = "Decided: " + data.decision +
    (data.option_id ? " (" + data.option_id + ")" : "") + " by " + data.by;
  if (!card) {
    transcript().append(
      el(
        "div",
        { class: "note" },
        "[permission] " + (data.title || "") + ": " + data.decision + " by " +
          data.by,
      ),
    );
    return;
  }
  card.classList.add("decided");
  card.querySelectorAll(".actions, .countdown, .answer-error").forEach((n) =>
    n.remove()
  );
  card.append(el("div", { class: "meta decision" }, text));
}
