// @ts-check
/// <reference lib="dom" />
/**
 * The URL's fragment: the token the URL `runner serve` prints carries (taken
 * once), and the open run, the filters and the page, so that a reload (or
 * the images toggle, which reloads) comes back to them.
 *
 * @module
 */

import { setValue } from "./dom.js";
import { state, TOKEN_KEY } from "./state.js";

/** @param {URLSearchParams} params */
function replaceHash(params) {
  const hash = params.toString();
  history.replaceState(
    null,
    "",
    location.pathname + location.search + (hash ? "#" + hash : ""),
  );
}

/**
 * The URL `runner serve` prints carries the token in its fragment (never
 * sent, so never logged): keeps it in this tab and takes it out of the
 * address bar and its history entry.
 */
export function takeTokenFromUrl() {
  const params = new URLSearchParams(location.hash.slice(1));
  const token = params.get("token");
  if (token === null) return;
  params.delete("token");
  if (token.trim()) sessionStorage.setItem(TOKEN_KEY, token.trim());
  replaceHash(params);
}

/** Puts the open run, the filters and the page in the fragment. */
export function saveHash() {
  const params = new URLSearchParams();
  if (state.selected) params.set("run", state.selected);
  for (const [key, value] of Object.entries(state.filters)) {
    if (value) params.set(key, value);
  }
  const before = state.pages[state.pages.length - 1];
  if (before) params.set("before", before);
  replaceHash(params);
}

/**
 * Takes the filters and the page from the fragment; returns the run it opens.
 *
 * @returns {string | null}
 */
export function restoreHash() {
  const params = new URLSearchParams(location.hash.slice(1));
  state.filters = {
    status: params.get("status") || "",
    conversation_id: params.get("conversation_id") || "",
    daemon_id: params.get("daemon_id") || "",
  };
  const before = params.get("before");
  state.pages = before ? [before] : [];
  setValue("filter-status", state.filters.status);
  setValue("filter-conversation", state.filters.conversation_id);
  setValue("filter-daemon", state.filters.daemon_id);
  return params.get("run");
}
