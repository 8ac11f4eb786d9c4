// @ts-check
/// <reference lib="dom" />
/**
 * The agent's answer as Markdown: rendered by marked with the agent's HTML
 * shown as text, then sanitised by DOMPurify so that no script, handler,
 * style or `javascript:` URL survives; images from the agent's URLs are not
 * loaded unless the operator asked (`/?images=1`), and then only `https:`.
 *
 * @module
 */

import { Marked } from "marked";
import DOMPurify from "dompurify";
import { IMAGES } from "./state.js";

/**
 * Text for HTML.
 *
 * @param {unknown} text
 * @returns {string}
 */
function escapeHtml(text) {
  /** @type {Record<string, string>} */
  const entities = {
    "&": "&amp;",
    "<": "&lt;",
    ">": "&gt;",
    '"': "&quot;",
    "'": "&#39;",
  };
  return String(text).replace(/[&<>"']/g, (c) => entities[c]);
}

// Agent HTML is shown as text, never parsed; DOMPurify then keeps only inert markup.
const markdown = new Marked({
  gfm: true,
  async: false,
  renderer: { html: (token) => escapeHtml(token.text) },
});

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (!(node instanceof Element)) return;
  if (node.tagName === "A") {
    node.setAttribute("rel", "noopener noreferrer nofollow");
    node.setAttribute("target", "_blank");
  }
  // The page's CSP takes agent images only over https: an http: one would be blocked anyway.
  if (
    node.tagName === "IMG" && IMAGES &&
    !/^(?:https:|data:)/i.test(node.getAttribute("src") || "")
  ) {
    node.removeAttribute("src");
    node.removeAttribute("srcset");
    node.setAttribute(
      "alt",
      "[image not loaded: not https: " + (node.getAttribute("alt") || "image") +
        "]",
    );
  }
  if (node.tagName === "IMG" && !IMAGES) {
    node.setAttribute("data-src", node.getAttribute("src") || "");
    node.removeAttribute("src");
    node.removeAttribute("srcset");
    node.setAttribute(
      "alt",
      "[image not loaded: " + (node.getAttribute("alt") || "image") + "]",
    );
  }
});

/**
 * The agent's Markdown as a sanitised fragment: no script, handler, style or
 * `javascript:` URL survives.
 *
 * @param {string} text
 * @returns {DocumentFragment}
 */
export function renderMarkdown(text) {
  return DOMPurify.sanitize(markdown.parse(text || "", { async: false }), {
    RETURN_DOM_FRAGMENT: true,
    FORBID_TAGS: [
      "style",
      "form",
      "input",
      "button",
      "textarea",
      "select",
      "iframe",
      "object",
      "embed",
      "svg",
      "math",
    ],
    FORBID_ATTR: ["style", "id", "class"],
    ALLOWED_URI_REGEXP: /^(?:https?:|mailto:|#)/i,
  });
}
