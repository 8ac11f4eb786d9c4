// @ts-check
/// <reference lib="dom" />
/**
 * What a new run of the idle conversation takes over from the run shown:
 * every key a caller may set, but not what the conversation remembers itself
 * (model, mode, session config), the `env-json` values (the record shows
 * only their names) or rules (refused over the operator's).
 *
 * @module
 */

import { $, el } from "./dom.js";
import { CALLER_KEYS, state } from "./state.js";

const NOT_CARRIED = new Set([
  "model",
  "mode",
  "session-config-json",
  "env-json",
  "permission-rules-json",
]);

/**
 * The run config a follow-up's new run takes from the run shown.
 *
 * @returns {Record<string, unknown>}
 */
export function carriedConfig() {
  /** @type {Record<string, unknown>} */
  const config = {};
  for (
    const [key, value] of Object.entries((state.run && state.run.config) || {})
  ) {
    if (
      !CALLER_KEYS.has(key) || NOT_CARRIED.has(key) || value === undefined ||
      value === null
    ) continue;
    if (JSON.stringify(value).includes("[REDACTED]")) continue;
    config[key] = value;
  }
  return config;
}

/** Lists the carried settings under the follow-up box. */
export function showCarried() {
  const list = $("follow-up-carried");
  list.textContent = "";
  for (const [key, value] of Object.entries(carriedConfig())) {
    list.append(
      el(
        "li",
        {},
        key + ": " +
          (typeof value === "string" ? value : JSON.stringify(value)),
      ),
    );
  }
}
