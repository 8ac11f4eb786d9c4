/**
 * The daemon's floor under a hub's `run.start`: a hub is a caller as the
 * daemon sees it, and the daemon's own flags are its operator
 * (`run/caller_floor.ts`, `docs/daemon.md`). The job's workspace, session
 * cwd and session values are held to it before anything starts, and the
 * values the hub says the conversation remembers by the run's set-up
 * (`run/setup.ts`), as `runner serve`'s are.
 *
 * @module
 */

import { parseRunConfig, type RunConfig } from "../config.ts";
import type { DaemonJobPlan, DaemonSandbox } from "../relay/payload.ts";
import type { JsonObject } from "../relay.ts";
import {
  applyHubFloor,
  type ProtectedPlaces,
  runnerPlaces,
  type SessionChoices,
  sessionChoicesOf,
} from "../run/caller_floor.ts";

/** The daemon's own floor settings (`runner daemon --workspace-roots …`). */
export interface DaemonFloor {
  /** Directories a hub's workspace must lie in (none: only an unconfined daemon takes any). */
  workspaceRoots?: string[];
  /** Modes a hub may ask for. */
  callerModes?: string[];
  /** Models a hub may ask for. */
  callerModels?: string[];
  /** Session config option ids a hub may set. */
  callerSessionConfigKeys?: string[];
  /** `false`: no job's agent gets `fs/read_text_file`, whatever the hub asks; unset: the hub decides. */
  fsRead?: boolean;
  /** `false`: no job's agent gets `fs/write_text_file`, whatever the hub asks; unset: the hub decides. */
  fsWrite?: boolean;
  /** The daemon's data dir (no job's workspace may be, hold or lie in it). */
  dataDir?: string;
}

/** The daemon's flags as the operator's run config the floor compares with. */
export function daemonOperatorConfig(
  floor: DaemonFloor,
  sandbox: DaemonSandbox | undefined,
): RunConfig {
  const config = parseRunConfig({
    provider: "custom",
    location: "daemon",
    "daemon-id": "self",
    "langbot-assets-enabled": false,
    sandbox: sandbox?.sandbox,
    "sandbox-network": sandbox?.sandboxNetwork,
    "workspace-roots": floor.workspaceRoots,
    "caller-modes": floor.callerModes,
    "caller-models": floor.callerModels,
    "caller-session-config-keys": floor.callerSessionConfigKeys,
    "fs-read": floor.fsRead ?? true,
    "fs-write": floor.fsWrite ?? true,
  });
  return { ...config, location: "local" };
}

/**
 * `runner daemon --workspace-roots … --caller-modes … --fs-read …` (lists
 * and switches, as text), checked like the run-config keys they are;
 * `fs-read` and `fs-write` are off unless turned on.
 *
 * @throws {RunnerError} `config.invalid` for a bad value.
 */
export function daemonFloorFromFlags(
  values: Record<string, unknown>,
  dataDir: string,
): DaemonFloor {
  const config = parseRunConfig({
    provider: "custom",
    location: "daemon",
    "daemon-id": "self",
    "workspace-roots": values["workspace-roots"],
    "caller-modes": values["caller-modes"],
    "caller-models": values["caller-models"],
    "caller-session-config-keys": values["caller-session-config-keys"],
    "fs-read": values["fs-read"],
    "fs-write": values["fs-write"],
  });
  return {
    workspaceRoots: config.workspaceRoots,
    callerModes: config.callerModes,
    callerModels: config.callerModels,
    callerSessionConfigKeys: config.callerSessionConfigKeys,
    fsRead: config.fsRead,
    fsWrite: config.fsWrite,
    dataDir,
  };
}

/** The keys the hub sent, kebab-case; `cwd` (where the agent starts) is its workspace. */
function hubKeys(payload: JsonObject): Record<string, unknown> {
  const raw = payload.config;
  const keys: Record<string, unknown> = Object.create(null);
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    return keys;
  }
  for (const [key, value] of Object.entries(raw)) {
    if (value === null || value === "") continue;
    keys[key.replaceAll("_", "-")] = value;
  }
  keys.workspace = keys.cwd ?? keys.workspace;
  return keys;
}

/** A job held to the daemon's floor. */
export interface FlooredJobPlan extends DaemonJobPlan {
  /**
   * What the daemon lets a hub choose of the session's model, mode and
   * options: the run's set-up drops the remembered values outside it, and
   * does not restore a stored session that would keep them in force
   * (`run/setup.ts`).
   */
  sessionChoices: SessionChoices;
}

/** What {@linkcode floorJobPlan} holds to the daemon's floor. */
export interface JobFloorInput {
  /** The mapped job. */
  plan: DaemonJobPlan;
  /** The `run.start` payload as the hub sent it. */
  payload: JsonObject;
  /** The daemon's own settings as a run config. */
  operator: RunConfig;
  /** The daemon's data dir and home. */
  places: Pick<ProtectedPlaces, "dataDir" | "home">;
}

/**
 * The job held to the daemon's floor: its config with the hub's
 * `session-config-json` merged over none of the daemon's own, its
 * workspace and session cwd named by the real paths checked (the agent
 * starts there, whatever a link says later), `fs-read` and `fs-write` off
 * unless the daemon turned them on (a hub may narrow, never widen: like
 * client terminals they are switched off, since a hub operator's own
 * `--fs-read true` rides in every job), and the session choices the run's
 * set-up holds the remembered values to.
 *
 * @throws {RunnerError} `http.forbidden` naming the key the hub may not set.
 */
export function floorJobPlan(input: JobFloorInput): FlooredJobPlan {
  const { plan, operator } = input;
  const config = applyHubFloor({
    operator,
    caller: hubKeys(input.payload),
    resolved: plan.config,
    places: runnerPlaces(input.places),
  });
  return {
    ...plan,
    config: {
      ...config,
      fsRead: config.fsRead && operator.fsRead,
      fsWrite: config.fsWrite && operator.fsWrite,
    },
    sessionCwd: config.sessionCwd ?? plan.sessionCwd,
    sessionChoices: sessionChoicesOf(operator),
  };
}
