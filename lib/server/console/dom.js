// @ts-check
/// <reference lib="dom" />
/**
 * The console's DOM helpers: the page's elements by id, new elements with
 * their text set as text (never parsed as HTML), and the transcript.
 *
 * @module
 */

/**
 * The page's element with this id; the page always has it.
 *
 * @param {string} id
 * @returns {HTMLElement}
 */
export function $(id) {
  const node = document.getElementById(id);
  if (!node) throw new Error("the console page has no #" + id);
  return node;
}

/**
 * The page's element with this id, of this kind.
 *
 * @template {HTMLElement} T
 * @param {string} id
 * @param {{ new (): T, prototype: T }} kind
 * @returns {T}
 */
export function $as(id, kind) {
  const node = $(id);
  if (!(node instanceof kind)) {
    throw new Error("#" + id + " is not a " + kind.name);
  }
  return node;
}

/**
 * A form field's value (an input, a text area or a select).
 *
 * @param {string} id
 * @returns {string}
 */
export function valueOf(id) {
  const node = $(id);
  if (
    node instanceof HTMLInputElement || node instanceof HTMLTextAreaElement ||
    node instanceof HTMLSelectElement
  ) return node.value;
  throw new Error("#" + id + " is not a form field");
}

/**
 * Sets a form field's value.
 *
 * @param {string} id
 * @param {string} value
 */
export function setValue(id, value) {
  const node = $(id);
  if (
    node instanceof HTMLInputElement || node instanceof HTMLTextAreaElement ||
    node instanceof HTMLSelectElement
  ) node.value = value;
  else throw new Error("#" + id + " is not a form field");
}

/**
 * The element `selector` finds under `root`; the console made it there.
 *
 * @param {ParentNode} root
 * @param {string} selector
 * @returns {HTMLElement}
 */
export function part(root, selector) {
  const node = root.querySelector(selector);
  if (!(node instanceof HTMLElement)) {
    throw new Error("no " + selector + " here");
  }
  return node;
}

/**
 * A new element with these attributes and, if given, this text (as text).
 *
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Record<string, string>} [attrs]
 * @param {string} [text]
 * @returns {HTMLElementTagNameMap[K]}
 */
export function el(tag, attrs, text) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    node.setAttribute(key, value);
  }
  if (text !== undefined) node.textContent = text;
  return node;
}

/** The open run's transcript. */
export function transcript() {
  return $("transcript");
}

/**
 * A value as text: a string as it is, anything else as indented JSON.
 *
 * @param {unknown} value
 * @returns {string}
 */
export function pretty(value) {
  if (value === undefined || value === null) return "";
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}
