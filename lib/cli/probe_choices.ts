/**
 * What `runner probe` shows of a session's choices: the advertised config
 * options, legacy modes and models, each with the value in force marked, so
 * an operator can pick `model`, `mode` and `session-config-json` values.
 *
 * @module
 */

import {
  optionValues,
  type SessionState,
  valuesInForce,
} from "../acp/session_state.ts";

function marked(values: string[], current: unknown): string {
  return values.map((value) => value === current ? `${value}*` : value)
    .join(", ");
}

/** Human-readable lines (`*` marks the value in force); none when nothing is advertised. */
export function choiceLines(state: SessionState | undefined): string[] {
  if (!state) return [];
  const lines: string[] = [];
  for (const option of state.configOptions ?? []) {
    const category = option.category ? ` (${option.category})` : "";
    const values = option.type === "select"
      ? marked(optionValues(option), option.currentValue)
      : `true/false, now ${option.currentValue}`;
    lines.push(`config option ${option.id}${category}: ${values}`);
  }
  if (state.modes) {
    lines.push(
      `modes: ${
        marked(
          state.modes.availableModes.map((mode) => mode.id),
          state.modes.currentModeId,
        )
      }`,
    );
  }
  if (state.models) {
    lines.push(
      `models: ${
        marked(
          state.models.availableModels.map((model) => model.modelId),
          state.models.currentModelId,
        )
      }`,
    );
  }
  if (!lines.length) lines.push("session choices: none advertised");
  return lines;
}

/** The `--json` form: the agent's own objects, and every value in force by name. */
export function choicesJson(
  state: SessionState | undefined,
): Record<string, unknown> | undefined {
  if (!state) return undefined;
  return {
    config_options: state.configOptions ?? [],
    modes: state.modes ?? null,
    models: state.models ?? null,
    values: valuesInForce(state),
  };
}
