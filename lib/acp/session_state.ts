/**
 * What an agent advertises a session can be configured with: config options
 * (`configOptions`), the legacy `modes` and the (unstable) `models`, as the
 * answers to `session/new`, `session/load`, `session/resume` and
 * `session/set_config_option` carry them.
 *
 * @module
 */

import type {
  SessionConfigOption,
  SessionModeState,
} from "@agentclientprotocol/sdk";

/** The unstable `models` of a session answer (`session/set_model`). */
export interface LegacyModelState {
  /** The model in force. */
  currentModelId: string;
  /** The models the agent offers. */
  availableModels: Array<{ modelId: string; name?: string }>;
}

/** A session's advertised choices and the values in force. */
export interface SessionState {
  /** Config options (`session/set_config_option`). */
  configOptions?: SessionConfigOption[];
  /** Legacy modes (`session/set_mode`). */
  modes?: SessionModeState;
  /** Legacy models (`session/set_model`). */
  models?: LegacyModelState;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The advertised choices of a session answer; what is malformed is left out. */
export function sessionStateOf(response: unknown): SessionState {
  const state: SessionState = {};
  if (!isObject(response)) return state;
  if (Array.isArray(response.configOptions)) {
    state.configOptions = response.configOptions.filter((option) =>
      isObject(option) && typeof option.id === "string"
    ) as SessionConfigOption[];
  }
  const modes = response.modes;
  if (
    isObject(modes) && typeof modes.currentModeId === "string" &&
    Array.isArray(modes.availableModes)
  ) {
    state.modes = modes as SessionModeState;
  }
  const models = response.models;
  if (
    isObject(models) && typeof models.currentModelId === "string" &&
    Array.isArray(models.availableModels)
  ) {
    state.models = models as unknown as LegacyModelState;
  }
  return state;
}

/** Whether the agent advertised anything to choose. */
export function hasChoices(state: SessionState): boolean {
  return Boolean(
    state.configOptions?.length || state.modes || state.models,
  );
}

/** The values a select option offers (its groups flattened). */
export function optionValues(option: SessionConfigOption): string[] {
  if (option.type !== "select") return [];
  return option.options.flatMap((entry) =>
    "group" in entry
      ? entry.options.map((inner) => inner.value)
      : [(entry as { value: string }).value]
  );
}

/** The config option of a category (`model`, `mode`), or of that id. */
export function optionFor(
  state: SessionState,
  name: string,
): SessionConfigOption | undefined {
  const options = state.configOptions ?? [];
  return options.find((option) => option.category === name) ??
    options.find((option) => option.id === name);
}

/** Every value in force: config options by id, legacy `mode` and `model` where no option covers them. */
export function valuesInForce(
  state: SessionState,
): Record<string, string | boolean> {
  const values: Record<string, string | boolean> = {};
  for (const option of state.configOptions ?? []) {
    values[option.id] = option.currentValue;
  }
  if (state.modes && !optionFor(state, "mode")) {
    values.mode = state.modes.currentModeId;
  }
  if (state.models && !optionFor(state, "model")) {
    values.model = state.models.currentModelId;
  }
  return values;
}

/** The model or mode in force (by category, id or the legacy field), or null. */
export function currentOf(
  state: SessionState,
  name: "model" | "mode",
): string | null {
  const option = optionFor(state, name);
  if (option) return String(option.currentValue);
  if (name === "mode") return state.modes?.currentModeId ?? null;
  return state.models?.currentModelId ?? null;
}
