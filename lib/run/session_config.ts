/**
 * Session config options (`model`, `mode`, `session-config-json`): each
 * wanted value is checked against what the agent advertised and set with
 * `session/set_config_option` (or the legacy `session/set_mode` /
 * `session/set_model`) before the prompt; an option whose answer changes
 * another's values is checked against the new values. See `docs/runs.md`,
 * "Session config options".
 *
 * @module
 */

import type { AgentConnection, SessionSetting } from "../acp/client.ts";
import {
  currentOf,
  hasChoices,
  optionFor,
  optionValues,
  type SessionState,
  sessionStateOf,
  valuesInForce,
} from "../acp/session_state.ts";
import type { RunConfig } from "../config.ts";
import { RunnerError } from "../errors.ts";
import type { RunContext } from "./context.ts";
import {
  effectiveSessionConfig,
  sameSettings,
  SESSION_SETTINGS_KEY,
  type SessionSettings,
  settingsOf,
  withoutNames,
} from "./session_memory.ts";
import { redactSecrets } from "../secrets.ts";

/** One wanted setting: a name (`model`, `mode` or an option id) and its value. */
export type WantedSetting = [name: string, value: string | boolean];

/** The settings a run wants, in the order they are set: model, mode, then the rest. */
export function wantedSettings(
  config: Pick<RunConfig, "model" | "mode" | "sessionConfigJson">,
): WantedSetting[] {
  const wanted: WantedSetting[] = [];
  if (config.model) wanted.push(["model", config.model]);
  if (config.mode) wanted.push(["mode", config.mode]);
  for (const [name, value] of Object.entries(config.sessionConfigJson ?? {})) {
    wanted.push([name, value]);
  }
  return wanted;
}

function unavailable(
  name: string,
  message: string,
  valid: Array<string | boolean>,
): RunnerError {
  return new RunnerError(
    "acp.config_unavailable",
    `${name}: ${message}${
      valid.length ? ` Valid values: ${valid.join(", ")}.` : ""
    } Pick one of them (runner probe lists the agent's choices), or leave ${name} unset.`,
    { detail: { key: name, valid } },
  );
}

/** The call that sets `name` to `value`, checked against `state`; null when already in force. */
export function settingFor(
  state: SessionState,
  [name, value]: WantedSetting,
): SessionSetting | null {
  const option = optionFor(state, name);
  if (option) {
    if (option.type === "boolean") {
      const flag = value === "true" ? true : value === "false" ? false : value;
      if (typeof flag !== "boolean") {
        throw unavailable(name, `"${value}" is not true or false.`, [
          true,
          false,
        ]);
      }
      return option.currentValue === flag
        ? null
        : { kind: "option", configId: option.id, value: flag };
    }
    const values = optionValues(option);
    if (!values.includes(String(value))) {
      throw unavailable(
        name,
        `"${value}" is not offered by the agent.`,
        values,
      );
    }
    return option.currentValue === String(value)
      ? null
      : { kind: "option", configId: option.id, value: String(value) };
  }
  if (name === "mode" && state.modes) {
    const ids = state.modes.availableModes.map((mode) => mode.id);
    if (!ids.includes(String(value))) {
      throw unavailable(
        name,
        `"${value}" is not a mode the agent offers.`,
        ids,
      );
    }
    return state.modes.currentModeId === value
      ? null
      : { kind: "mode", modeId: String(value) };
  }
  if (name === "model" && state.models) {
    const ids = state.models.availableModels.map((model) => model.modelId);
    if (!ids.includes(String(value))) {
      throw unavailable(
        name,
        `"${value}" is not a model the agent offers.`,
        ids,
      );
    }
    return state.models.currentModelId === value
      ? null
      : { kind: "model", modelId: String(value) };
  }
  const ids = (state.configOptions ?? []).map((option) => option.id);
  throw new RunnerError(
    "acp.config_unavailable",
    `${name}: the agent offers no such session config option${
      ids.length ? ` (it offers: ${ids.join(", ")})` : " (it offers none)"
    }. Leave ${name} unset, or use an option runner probe lists.`,
    { detail: { key: name, valid: ids } },
  );
}

/** `state` after a setting was accepted. */
function afterSetting(
  state: SessionState,
  setting: SessionSetting,
  answered: SessionState["configOptions"],
): SessionState {
  if (setting.kind === "option") {
    const configOptions = answered ??
      state.configOptions?.map((option) =>
        option.id === setting.configId
          ? { ...option, currentValue: setting.value } as typeof option
          : option
      );
    return { ...state, configOptions };
  }
  if (setting.kind === "mode" && state.modes) {
    return {
      ...state,
      modes: { ...state.modes, currentModeId: setting.modeId },
    };
  }
  if (setting.kind === "model" && state.models) {
    return {
      ...state,
      models: { ...state.models, currentModelId: setting.modelId },
    };
  }
  return state;
}

/** Options for {@linkcode configureSession}. */
interface ConfigureSessionOptions {
  /** The connection. */
  connection: AgentConnection;
  /** The session. */
  sessionId: string;
  /** What the agent advertised (its answer to new, load or resume). */
  state: SessionState;
  /** The wanted settings, in order. */
  wanted: WantedSetting[];
  /** Names whose value may be left out when the agent does not offer it (remembered ones). */
  skippable?: readonly string[];
  /** Aborts the calls. */
  signal?: AbortSignal;
}

/** What {@linkcode configureSession} leaves in force. */
interface ConfiguredSession {
  /** The state after every setting. */
  state: SessionState;
  /** The names whose value was changed by a call. */
  changed: string[];
  /** The skippable names left out because the agent does not offer their value. */
  skipped: string[];
}

/**
 * Sets each wanted value the agent does not already have in force.
 *
 * @throws {RunnerError} `acp.config_unavailable` for a value or option the
 * agent does not offer; `acp.config_failed` when the agent refuses a call.
 */
async function configureSession(
  options: ConfigureSessionOptions,
): Promise<ConfiguredSession> {
  let { state } = options;
  const changed: string[] = [];
  const skipped: string[] = [];
  for (const wanted of options.wanted) {
    let setting: SessionSetting | null;
    try {
      setting = settingFor(state, wanted);
    } catch (error) {
      if (!options.skippable?.includes(wanted[0])) throw error;
      skipped.push(wanted[0]);
      continue;
    }
    if (!setting) continue;
    let answered: SessionState["configOptions"];
    try {
      answered = await options.connection.configure(
        { ...setting, sessionId: options.sessionId },
        options.signal,
      );
    } catch (error) {
      if (
        !(error instanceof RunnerError) || error.code !== "acp.session_failed"
      ) {
        throw error;
      }
      throw new RunnerError(
        "acp.config_failed",
        `${wanted[0]}: the agent refused to set "${
          wanted[1]
        }" (${error.message}). Pick another value, or leave ${
          wanted[0]
        } unset.`,
        { detail: { key: wanted[0] } },
      );
    }
    state = afterSetting(state, setting, answered);
    changed.push(wanted[0]);
  }
  return { state, changed, skipped };
}

/** The `session.configured` event's data for `state`. */
export function configuredData(
  state: SessionState,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    model: currentOf(state, "model"),
    mode: currentOf(state, "mode"),
    config: valuesInForce(state),
    ...extra,
  };
}

/**
 * Sets the run's wanted values on its session (after new, load, resume, or
 * on a warm agent whose values in force differ) — its own, and the
 * conversation's remembered ones for what it does not ask — and emits
 * `session.configured` with the values in force, when the agent advertised
 * anything or the run wants anything; then a `state.updated`
 * (`external.acp_session_config`) when what the conversation should
 * remember changed.
 */
export async function configureRunSession(
  run: RunContext,
  { connection, state }: { connection: AgentConnection; state: SessionState },
): Promise<void> {
  const memory = run.options.sessionMemory;
  const effective = effectiveSessionConfig(run.config, memory, {
    model: optionFor(state, "model")?.id,
    mode: optionFor(state, "mode")?.id,
  });
  const wanted = wantedSettings(effective.values);
  run.sessionState = state;
  let skipped: string[] = [];
  if (wanted.length || hasChoices(state)) {
    const configured = await configureSession({
      connection,
      sessionId: run.sessionId!,
      state,
      wanted,
      // A remembered value the agent no longer offers (an update dropped a
      // model; another value the run asks for narrowed the choices) is left
      // out and forgotten: only a value the run asks for fails it.
      skippable: effective.remembered,
      signal: run.abort.signal,
    }).catch((error) => {
      throw rememberedHint(
        error,
        effective.remembered,
        run.options.conversationId,
      );
    });
    skipped = configured.skipped;
    run.sessionState = configured.state;
    const remembered = effective.remembered.filter((name) =>
      !skipped.includes(name)
    );
    run.emitter.emit(
      "session.configured",
      configuredData(configured.state, {
        changed: configured.changed,
        ...(remembered.length ? { remembered } : {}),
        ...(skipped.length ? { dropped: skipped } : {}),
      }),
    );
  }
  rememberSettings(run, settingsOf(withoutNames(effective.values, skipped)));
}

/**
 * Emits the `state.updated` that makes the conversation remember `settings`
 * when they changed; never for values that hold a secret (the store would
 * keep them redacted, and every later run would ask for the redaction).
 */
function rememberSettings(run: RunContext, settings: SessionSettings): void {
  const memory = run.options.sessionMemory;
  if (!memory) return;
  // A session started in place of one not restored is remembered afresh:
  // the store still holds the values that kept the old one from restoring.
  if (sameSettings(settings, memory) && !run.options.sessionNotRestored) return;
  const shown = JSON.stringify(settings);
  if (redactSecrets(shown, run.secrets) !== shown) {
    run.log({ msg: "session config values hold a secret; not remembered" });
    return;
  }
  run.emitter.emit("state.updated", {
    scope: "conversation",
    key: SESSION_SETTINGS_KEY,
    value: settings,
  });
}

/** A failure about a remembered value says where the value came from and how to drop it. */
function rememberedHint(
  error: unknown,
  remembered: string[],
  conversationId: string | undefined,
): unknown {
  if (!(error instanceof RunnerError)) return error;
  const key = (error.detail as { key?: unknown } | undefined)?.key;
  if (typeof key !== "string" || !remembered.includes(key)) return error;
  return new RunnerError(
    error.code,
    `${error.message} (${key} was remembered from an earlier run of conversation ${conversationId}: set ${key} on this run, or forget the conversation's sessions with DELETE /v1/conversations/${conversationId}.)`,
    {
      retryable: error.retryable,
      detail: { ...error.detail, remembered: true },
    },
  );
}

/**
 * Follows the agent's own `config_option_update` and `current_mode_update`
 * during a turn: the values in force change, and `session.configured` says
 * so (`by: "agent"`).
 */
export function followConfigUpdate(
  run: RunContext,
  update: Record<string, unknown>,
): void {
  const state = run.sessionState ?? {};
  let next: SessionState | undefined;
  if (
    update.sessionUpdate === "config_option_update" &&
    Array.isArray(update.configOptions)
  ) {
    next = {
      ...state,
      ...sessionStateOf({ configOptions: update.configOptions }),
    };
  } else if (
    update.sessionUpdate === "current_mode_update" &&
    typeof update.currentModeId === "string"
  ) {
    const modeOption = optionFor(state, "mode");
    next = {
      ...state,
      modes: state.modes &&
        { ...state.modes, currentModeId: update.currentModeId },
      configOptions: state.configOptions?.map((option) =>
        option === modeOption && option.type === "select"
          ? { ...option, currentValue: update.currentModeId as string }
          : option
      ),
    };
  }
  if (!next) return;
  run.sessionState = next;
  run.emitter.emit("session.configured", configuredData(next, { by: "agent" }));
}
