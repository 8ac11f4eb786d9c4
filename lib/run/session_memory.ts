/**
 * What a conversation remembers of its session's config values: the `model`,
 * `mode` and `session-config-json` options the run that last configured the
 * conversation's session asked for (not the agent's defaults), kept with the
 * stored session. A later run that may reuse the session asks for them again
 * where it asks nothing itself; what it asks wins and is remembered instead.
 * See `docs/runs.md`, "Session config options".
 *
 * @module
 */

import type { RunConfig } from "../config.ts";

/** Remembered session config values, in the form they are stored and sent. */
export interface SessionSettings {
  /** The wanted `model`. */
  model?: string;
  /** The wanted `mode`. */
  mode?: string;
  /** The wanted `session-config-json` options (option id → value). */
  config?: Record<string, string | boolean>;
}

/** The state key the remembered values travel under (`state.updated`). */
export const SESSION_SETTINGS_KEY = "external.acp_session_config";

/** The session config part of a run config. */
export type SessionConfigValues = Pick<
  RunConfig,
  "model" | "mode" | "sessionConfigJson"
>;

function text(value: unknown): string | undefined {
  return typeof value === "string" && value !== "" ? value : undefined;
}

/** Remembered values read from stored or sent JSON; what is malformed is left out. */
export function sessionSettingsFrom(value: unknown): SessionSettings {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return {};
  }
  const raw = value as Record<string, unknown>;
  const config: Record<string, string | boolean> = {};
  if (typeof raw.config === "object" && raw.config !== null) {
    for (const [id, option] of Object.entries(raw.config)) {
      if (typeof option === "string" || typeof option === "boolean") {
        config[id] = option;
      }
    }
  }
  return settingsOf({
    model: text(raw.model),
    mode: text(raw.mode),
    sessionConfigJson: config,
  });
}

/** The values to remember for a run that wanted `values`. */
export function settingsOf(values: SessionConfigValues): SessionSettings {
  const settings: SessionSettings = {};
  if (values.model) settings.model = values.model;
  if (values.mode) settings.mode = values.mode;
  const config = values.sessionConfigJson ?? {};
  if (Object.keys(config).length) settings.config = { ...config };
  return settings;
}

/** The values a run wants, and which of them the conversation remembered. */
export interface EffectiveSessionConfig {
  /** The run's own values, with the remembered ones where it asked nothing. */
  values: SessionConfigValues;
  /** The names (`model`, `mode`, option ids) taken from the conversation. */
  remembered: string[];
}

/**
 * The option ids that stand for `model` and `mode` on the agent (its
 * `session-config-json` spelling of them): asking for either spelling asks
 * for both. Without the agent's options at hand, the ids `model` and `mode`.
 */
export interface SessionOptionAliases {
  /** The id of the agent's model option. */
  model?: string;
  /** The id of the agent's mode option. */
  mode?: string;
}

/**
 * The values a run wants: its own, and, when it may reuse the conversation's
 * session (`reuse-session`), the remembered value of each name it does not
 * ask for (a `model` asked as `model` or as its option id counts as asked
 * either way; an empty value is not asked). `remembered` undefined: nothing
 * is remembered for this run.
 */
export function effectiveSessionConfig(
  config: SessionConfigValues & Pick<RunConfig, "reuseSession">,
  remembered: SessionSettings | undefined,
  aliases: SessionOptionAliases = {},
): EffectiveSessionConfig {
  const own: SessionConfigValues = {
    model: text(config.model),
    mode: text(config.mode),
    sessionConfigJson: config.sessionConfigJson ?? {},
  };
  if (!remembered || !config.reuseSession) {
    return { values: own, remembered: [] };
  }
  const idsOf = (name: "model" | "mode") =>
    new Set([name, aliases[name]].filter((id): id is string => Boolean(id)));
  const ids = { model: idsOf("model"), mode: idsOf("mode") };
  const asked = (name: "model" | "mode") =>
    own[name] !== undefined ||
    [...ids[name]].some((id) => id in own.sessionConfigJson);
  const names: string[] = [];
  const take = (name: "model" | "mode") => {
    if (asked(name) || remembered[name] === undefined) return own[name];
    names.push(name);
    return remembered[name];
  };
  const model = take("model");
  const mode = take("mode");
  const sessionConfigJson: Record<string, string | boolean> = {};
  for (const [id, value] of Object.entries(remembered.config ?? {})) {
    const shadowed = id in own.sessionConfigJson ||
      (ids.model.has(id) && asked("model")) ||
      (ids.mode.has(id) && asked("mode"));
    if (!shadowed) {
      sessionConfigJson[id] = value;
      names.push(id);
    }
  }
  Object.assign(sessionConfigJson, own.sessionConfigJson);
  return { values: { model, mode, sessionConfigJson }, remembered: names };
}

/** `values` without the names in `dropped` (`model`, `mode` or option ids). */
export function withoutNames(
  values: SessionConfigValues,
  dropped: readonly string[],
): SessionConfigValues {
  const sessionConfigJson = { ...values.sessionConfigJson };
  for (const name of dropped) delete sessionConfigJson[name];
  return {
    model: dropped.includes("model") ? undefined : values.model,
    mode: dropped.includes("mode") ? undefined : values.mode,
    sessionConfigJson,
  };
}

/** Whether two sets of remembered values are the same (option order aside). */
export function sameSettings(a: SessionSettings, b: SessionSettings): boolean {
  if (a.model !== b.model || a.mode !== b.mode) return false;
  const left = Object.entries(a.config ?? {});
  const right = b.config ?? {};
  return left.length === Object.keys(right).length &&
    left.every(([id, value]) => right[id] === value);
}
