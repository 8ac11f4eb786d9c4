/**
 * The operator's floor under a caller's run settings, decided in one place
 * for every entrance: `runner serve`'s `POST /v1/runs` (and so the console
 * and a steering post), the n8n webhook's query, remembered conversation
 * settings, and a hub's `run.start` to `runner daemon` (whose own flags are
 * its operator). Each key a caller may send has one rule here, with the
 * reason it cannot widen access; `docs/http-api.md`'s "What a caller may set"
 * is generated from {@linkcode CALLER_KEY_FLOORS}.
 *
 * @module
 */

import { widerNetwork } from "../agent/sandbox_network.ts";
import { basename, dirname, isAbsolute, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import type { RunConfig } from "../config.ts";
import { RunnerError } from "../errors.ts";
import { checkPermissionFloor } from "./permission_floor.ts";
import type { SessionConfigValues, SessionSettings } from "./session_memory.ts";

/** How a caller's value of a key is judged against the operator's. */
export type FloorRule =
  | "as is"
  | "only narrower"
  | "at most the operator's"
  | "inside the operator's bounds"
  | "only values the operator lists"
  | "only names the operator allows";

/** One key a caller may send: its rule and why it cannot widen access. */
export interface CallerKeyFloor {
  /** The run-config key. */
  key: string;
  /** How a caller's value is judged. */
  rule: FloorRule;
  /** Why that rule keeps the caller inside the operator's floor. */
  why: string;
}

const TIME = "time, not access: it widens no file, network or permission";

/** Every run-config key a caller may set per run, with its rule, in the docs' order. */
export const CALLER_KEY_FLOORS: readonly CallerKeyFloor[] = [
  {
    key: "provider",
    rule: "as is",
    why:
      "picks a preset, whose command is pinned by the runner; `custom` (a caller's command), and an ACP registry agent other than the operator's own `provider`, only with `--allow-custom-commands`",
  },
  {
    key: "location",
    rule: "as is",
    why:
      "`remote-ssh` cannot be confined, so it is refused under the operator's `sandbox=confined`; under `off` the agent has the runner user's rights (its SSH keys included) anyway; a daemon applies its own floor",
  },
  {
    key: "workspace",
    rule: "inside the operator's bounds",
    why:
      "by real path under `workspace-roots` (unset: the operator's `workspace` and below; with neither, anywhere under `sandbox=off`, nowhere under `confined`); never the data dir or inside it, `$HOME`, `/`, a parent of any of them or of the runner's own files; no `..` segment",
  },
  {
    key: "session-cwd",
    rule: "inside the operator's bounds",
    why:
      "inside the run's workspace by real path (`fs/*` serves files below it); no `..` segment",
  },
  {
    key: "env-json",
    rule: "only names the operator allows",
    why:
      "names listed with `--allow-env-names`, merged by name over the operator's",
  },
  {
    key: "reuse-session",
    rule: "as is",
    why: "the caller's own conversation's session",
  },
  {
    key: "create-session-if-missing",
    rule: "as is",
    why: "the caller's own conversation's session",
  },
  {
    key: "streaming",
    rule: "as is",
    why: "the shape of the caller's own events",
  },
  { key: "startup-timeout", rule: "as is", why: TIME },
  { key: "initialize-timeout", rule: "as is", why: TIME },
  { key: "timeout", rule: "as is", why: TIME },
  { key: "cancel-grace", rule: "as is", why: TIME },
  { key: "late-update-ms", rule: "as is", why: TIME },
  { key: "delta-coalesce-ms", rule: "as is", why: TIME },
  { key: "replay-quiet-ms", rule: "as is", why: TIME },
  {
    key: "max-message-mb",
    rule: "at most the operator's",
    why: "a larger value is `400 config.invalid`",
  },
  {
    key: "max-attachment-mb",
    rule: "at most the operator's",
    why: "a larger value is `400 config.invalid`",
  },
  {
    key: "max-prompt-mb",
    rule: "at most the operator's",
    why: "a larger value is `400 config.invalid`",
  },
  {
    key: "permission-decision",
    rule: "only narrower",
    why: "stricter than the operator's (see below)",
  },
  {
    key: "permission-timeout",
    rule: "only narrower",
    why: "not shorter than the operator's while the fallback approves",
  },
  {
    key: "permission-fallback",
    rule: "only narrower",
    why: "stricter than the operator's",
  },
  {
    key: "permission-rules-json",
    rule: "only narrower",
    why:
      "only when the operator has no rules, none deciding more loosely than its `permission-decision`",
  },
  {
    key: "model",
    rule: "only values the operator lists",
    why:
      "`caller-models`; unset: any while the operator set no `model`, else only the operator's",
  },
  {
    key: "mode",
    rule: "only values the operator lists",
    why:
      "`caller-modes`; unset: any only while the operator set no `mode` and its permission policy approves anyway (a mode may switch the agent's permission prompts off), else only the operator's",
  },
  {
    key: "session-config-json",
    rule: "only values the operator lists",
    why:
      "merged key by key over the operator's object; option ids in `caller-session-config-keys` (unset: ids the operator did not set, under the condition of `mode`); ids `mode` and `model` are judged as those keys",
  },
  {
    key: "auth-method",
    rule: "as is",
    why:
      "one of the agent's own methods; its credentials only come from the operator's environment and the allowed `env-json` names",
  },
  {
    key: "fs-read",
    rule: "only narrower",
    why:
      "`true` only when the operator's is `true` (the runner itself serves the files)",
  },
  {
    key: "fs-write",
    rule: "only narrower",
    why:
      "`true` only when the operator's is `true` (the runner itself writes the files)",
  },
  {
    key: "client-terminals",
    rule: "only narrower",
    why:
      "`true` only when the operator's is `true` (the commands run on the runner's machine)",
  },
  {
    key: "terminal-timeout",
    rule: "at most the operator's",
    why: "a larger value is `400 config.invalid`",
  },
  {
    key: "terminal-output-bytes",
    rule: "at most the operator's",
    why: "a larger value is `400 config.invalid`",
  },
  {
    key: "append-run-scope-prompt",
    rule: "as is",
    why: "text in the caller's own prompt",
  },
  {
    key: "langbot-assets-enabled",
    rule: "as is",
    why:
      "the run's own assets endpoint, serving only what the caller's own `assets` field grants; refused with `sandbox-network=none`",
  },
  {
    key: "langbot-assets-mode",
    rule: "as is",
    why: "the gateway's host, port and URL are the operator's",
  },
  {
    key: "langbot-assets-token-ttl",
    rule: "as is",
    why: "the token only opens the run's own assets",
  },
  {
    key: "knowledge-bases",
    rule: "as is",
    why: "the caller's own grant for its own run's assets",
  },
  {
    key: "sandbox",
    rule: "only narrower",
    why: "`off` under the operator's `confined` is refused",
  },
  {
    key: "sandbox-network",
    rule: "only narrower",
    why:
      "a network wider than the operator's (`none` < `full` < `host`) is refused under its `confined`",
  },
  {
    key: "ssh-target",
    rule: "as is",
    why: "remote-ssh only (see `location`)",
  },
  { key: "ssh-port", rule: "as is", why: "remote-ssh only (see `location`)" },
  { key: "ssh-connect-timeout", rule: "as is", why: TIME },
  {
    key: "remote-shell",
    rule: "as is",
    why: "remote-ssh only (see `location`)",
  },
  {
    key: "daemon-id",
    rule: "as is",
    why:
      "a daemon connected to this hub; it holds every job to its own floor (`docs/daemon.md`)",
  },
  { key: "daemon-connect-timeout", rule: "as is", why: TIME },
];

/** The run-config keys a caller may set per run. */
export const CALLER_CONFIG_KEYS: readonly string[] = CALLER_KEY_FLOORS.map((
  floor,
) => floor.key);

/** Limits a caller may lower but not raise past the operator's value. */
const CAPPED_KEYS: ReadonlyArray<keyof RunConfig> = [
  "maxMessageMb",
  "maxAttachmentMb",
  "maxPromptMb",
  "terminalOutputBytes",
  "terminalTimeout",
];

/** Places no caller's workspace may be, contain or lie in (the data dir). */
export interface ProtectedPlaces {
  /** The runner's data dir (its store, tokens and agents' records). */
  dataDir?: string;
  /** The runner user's home. */
  home?: string;
  /** The runner's own files (its executable, its source). */
  own?: string[];
}

/**
 * The places of this runner process: `dataDir` and `home` as given, and its
 * own files (the executable and, run from source, the source tree).
 */
export function runnerPlaces(
  { dataDir, home }: Pick<ProtectedPlaces, "dataDir" | "home">,
): ProtectedPlaces {
  const own = [Deno.execPath()];
  const main = new URL(Deno.mainModule);
  if (main.protocol === "file:") {
    const dir = dirname(fileURLToPath(main));
    // A compiled runner's main module is virtual: only a real tree counts.
    if (isDirectory(dir)) own.push(dir);
  }
  return { dataDir, home, own };
}

function isDirectory(path: string): boolean {
  try {
    return Deno.statSync(path).isDirectory;
  } catch {
    return false;
  }
}

/** What {@linkcode applyCallerFloor} judges. */
export interface CallerFloorInput {
  /** The operator's run defaults, parsed (built-in defaults included). */
  operator: RunConfig;
  /** The caller's keys as sent, normalized (kebab-case). */
  caller: Record<string, unknown>;
  /** The run config with the caller's keys merged over the operator's. */
  resolved: RunConfig;
  /** What no caller's workspace may be. */
  places: ProtectedPlaces;
}

/** A refusal naming the key; `config.invalid` for a cap, else `http.forbidden`. */
function refused(key: string, message: string): RunnerError {
  return new RunnerError("http.forbidden", `${key}: ${message}`, {
    detail: { key },
  });
}

/**
 * The run config a caller gets: `resolved` with the caller's
 * `session-config-json` merged key by key over the operator's, after every
 * caller key was held to the operator's floor; a workspace and session cwd
 * the caller chose on this machine are named by the real paths checked.
 *
 * @throws {RunnerError} `http.forbidden` naming the key for a value that
 * widens access; `config.invalid` for a limit above the operator's.
 */
export function applyCallerFloor(input: CallerFloorInput): RunConfig {
  const { operator, caller } = input;
  const resolved = withOperatorSessionConfig(input);
  checkPermissionFloor({ operator, resolved, caller });
  checkCaps(operator, caller, resolved);
  checkNarrower(operator, resolved);
  checkSandbox(operator, resolved);
  return checkPlacesAndSession({ ...input, resolved });
}

/**
 * The floor a daemon holds a hub's `run.start` to (a hub is a caller, and
 * the daemon's own flags are its operator): the workspace and the session
 * cwd (returned by their checked real paths) and the session's model, mode
 * and options as for any caller. The sandbox and client terminals are
 * clamped where the payload is mapped (`relay/payload.ts`), `fs-read` and
 * `fs-write` by the daemon (`daemon/job_floor.ts`); the hub's permission
 * policy is the hub operator's.
 *
 * @throws {RunnerError} `http.forbidden` naming the key.
 */
export function applyHubFloor(input: CallerFloorInput): RunConfig {
  const resolved = withOperatorSessionConfig(input);
  return checkPlacesAndSession({ ...input, resolved });
}

/** The caller's `session-config-json` merged key by key over the operator's, never replacing it. */
function withOperatorSessionConfig(input: CallerFloorInput): RunConfig {
  const { operator, caller, resolved } = input;
  if (caller["session-config-json"] === undefined) return { ...resolved };
  return {
    ...resolved,
    sessionConfigJson: {
      ...operator.sessionConfigJson,
      ...resolved.sessionConfigJson,
    },
  };
}

/**
 * The workspace, the session cwd and the session values, where every
 * entrance judges them alike. The config returned names the workspace and
 * session cwd a caller chose by the real paths that were checked: the run
 * uses those, so a link swapped after the check changes nothing.
 */
function checkPlacesAndSession(input: CallerFloorInput): RunConfig {
  const { operator, caller, resolved } = input;
  const workspace = checkWorkspace(input);
  // A session cwd that is the workspace as written is the workspace checked.
  const same = caller["session-cwd"] === undefined && workspace &&
    resolved.sessionCwd === resolved.workspace;
  const sessionCwd = same
    ? { sessionCwd: workspace.workspace }
    : checkSessionCwd(caller, { ...resolved, ...workspace });
  const asked = caller["session-config-json"];
  checkSessionChoices(sessionChoicesOf(operator), {
    model: caller.model === undefined ? undefined : resolved.model,
    mode: caller.mode === undefined ? undefined : resolved.mode,
    config: asked === undefined ? {} : askedOptions(resolved, operator),
  });
  return { ...resolved, ...workspace, ...sessionCwd };
}

/** The option values the caller's object set (the merged object minus what the operator's gave unchanged). */
function askedOptions(
  resolved: RunConfig,
  operator: RunConfig,
): Record<string, string | boolean> {
  return Object.fromEntries(
    Object.entries(resolved.sessionConfigJson).filter(([id, value]) =>
      operator.sessionConfigJson[id] !== value
    ),
  );
}

function checkCaps(
  operator: RunConfig,
  caller: Record<string, unknown>,
  resolved: RunConfig,
): void {
  for (const field of CAPPED_KEYS) {
    const key = field.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
    if (caller[key] === undefined) continue;
    const limit = operator[field] as number;
    if ((resolved[field] as number) > limit) {
      throw new RunnerError(
        "config.invalid",
        `${key}: at most ${limit} per request (the server's limit; the operator can raise it with runner serve --${key}).`,
        { detail: { key } },
      );
    }
  }
}

/** Switches a caller may turn off, never on. */
function checkNarrower(operator: RunConfig, resolved: RunConfig): void {
  const switches = [
    ["fs-read", "fsRead", "the runner serves the agent's file reads itself"],
    ["fs-write", "fsWrite", "the runner writes the agent's files itself"],
    [
      "client-terminals",
      "clientTerminals",
      "the agent's commands would run on the runner's machine",
    ],
  ] as const;
  for (const [key, field, why] of switches) {
    if (!resolved[field] || operator[field]) continue;
    throw refused(
      key,
      `the operator has not turned ${key} on (runner serve --${key} true; ${why}); a request may turn it off, never on.`,
    );
  }
}

/**
 * A caller may confine its run more than the operator does, never less:
 * `sandbox=off` under an operator's `confined`, or a `sandbox-network` wider
 * than its own (`none` < `full` < `host`).
 */
function checkSandbox(operator: RunConfig, resolved: RunConfig): void {
  if (operator.sandbox !== "confined") return;
  const key = resolved.sandbox !== "confined"
    ? "sandbox"
    : widerNetwork(resolved.sandboxNetwork, operator.sandboxNetwork)
    ? "sandbox-network"
    : undefined;
  if (!key) return;
  throw refused(
    key,
    `the operator confines every run (sandbox=confined, sandbox-network=${operator.sandboxNetwork}); a request may confine its run more, never less.`,
  );
}

/** Whether a path names a `..` segment (a caller's path is taken literally). */
function climbs(path: string): boolean {
  return path.split(/[\\/]/).includes("..");
}

/** Whether `candidate` is `root` or below it (both absolute). */
export function isWithin(root: string, candidate: string): boolean {
  const rest = relative(root, candidate);
  return rest === "" || (!rest.startsWith("..") && !isAbsolute(rest));
}

/**
 * The real path of `path`: its deepest existing ancestor resolved by the
 * kernel (links and all), the part that does not exist yet appended.
 */
export function realPathOf(path: string): string {
  const missing: string[] = [];
  let current = path;
  for (;;) {
    try {
      return join(Deno.realPathSync(current), ...missing);
    } catch (error) {
      if (!(error instanceof Deno.errors.NotFound)) throw error;
    }
    const parent = dirname(current);
    if (parent === current) return path;
    missing.unshift(basename(current));
    current = parent;
  }
}

function realOrRefused(key: string, path: string): string {
  try {
    return realPathOf(path);
  } catch (error) {
    throw refused(
      key,
      `${path} cannot be resolved on the runner's machine (${
        error instanceof Error ? error.name : error
      }); choose a directory under the operator's workspace-roots.`,
    );
  }
}

/** The real directories a caller's workspace must lie in; undefined: anywhere. */
function rootsOf(operator: RunConfig): string[] | undefined {
  const roots = operator.workspaceRoots.length
    ? operator.workspaceRoots
    : operator.workspace
    ? [operator.workspace]
    : [];
  if (roots.length) return roots.map((root) => realPathOf(root));
  return operator.sandbox === "confined" ? [] : undefined;
}

/**
 * A caller's workspace: no `..`; on this machine (`local`) by real path
 * under the operator's roots and never a protected place. Returns that real
 * path, for the run to use instead of the path as written.
 */
function checkWorkspace(
  input: CallerFloorInput,
): Pick<RunConfig, "workspace"> | undefined {
  const { operator, caller, resolved, places } = input;
  if (caller.workspace === undefined || resolved.workspace === undefined) {
    return undefined;
  }
  if (climbs(String(caller.workspace))) {
    throw refused("workspace", "must not contain a .. segment.");
  }
  if (resolved.location !== "local") return undefined;
  const real = realOrRefused("workspace", resolved.workspace);
  checkProtected(real, places);
  const roots = rootsOf(operator);
  if (roots === undefined || roots.some((root) => isWithin(root, real))) {
    return { workspace: real };
  }
  throw refused(
    "workspace",
    roots.length
      ? `${resolved.workspace} is not under the operator's workspace roots; choose a directory under ${
        roots.join(", ")
      } (the operator sets them with --workspace-roots).`
      : "the operator confines runs (sandbox=confined) and set no workspace-roots, so a request may not choose its workspace; the operator can allow directories with --workspace-roots.",
  );
}

/** Refuses `/`, the home, the data dir and the runner's files, their parents, and what lies in the data dir or the runner's files. */
function checkProtected(real: string, places: ProtectedPlaces): void {
  const named: Array<[string, string | undefined]> = [
    ["/", "/"],
    ["the runner's home", places.home],
    ["the runner's data dir", places.dataDir],
    ...(places.own ?? []).map((
      path,
    ): [string, string | undefined] => ["the runner's own files", path]),
  ];
  for (const [what, path] of named) {
    if (!path) continue;
    const protectedReal = realPathOf(path);
    // The data dir and the runner's files are off limits inside too.
    const inside = path !== "/" && path !== places.home &&
      isWithin(protectedReal, real);
    if (isWithin(real, protectedReal) || inside) {
      throw refused(
        "workspace",
        `a request may not run an agent in ${what} or a directory that holds it; choose a directory under the operator's workspace-roots.`,
      );
    }
  }
}

/**
 * A caller's session cwd lies inside the run's workspace (real paths on this
 * machine). Returns its real path there, for the run to use.
 */
function checkSessionCwd(
  caller: Record<string, unknown>,
  resolved: RunConfig,
): Pick<RunConfig, "sessionCwd"> | undefined {
  if (caller["session-cwd"] === undefined && caller.workspace === undefined) {
    return undefined;
  }
  const cwd = resolved.sessionCwd;
  if (cwd === undefined || resolved.workspace === undefined) return undefined;
  if (
    caller["session-cwd"] !== undefined && climbs(String(caller["session-cwd"]))
  ) {
    throw refused("session-cwd", "must not contain a .. segment.");
  }
  if (
    resolved.location === "remote-ssh" && resolved.remoteShell === "powershell"
  ) {
    return undefined;
  }
  const local = resolved.location === "local";
  const workspace = local
    ? realOrRefused("workspace", resolved.workspace)
    : resolved.workspace;
  const real = local ? realOrRefused("session-cwd", cwd) : cwd;
  if (isWithin(workspace, real)) {
    return local ? { sessionCwd: real } : undefined;
  }
  throw refused(
    "session-cwd",
    `${cwd} is outside the run's workspace ${resolved.workspace}; a request may only choose a directory inside it.`,
  );
}

/** What callers may choose of the session's model, mode and config options. */
export interface SessionChoices {
  /** Modes a caller may choose; `"any"`: every mode. */
  modes: readonly string[] | "any";
  /** Models a caller may choose; `"any"`: every model. */
  models: readonly string[] | "any";
  /** Option ids a caller may set; `"any"`: every id the operator did not pin. */
  configKeys: readonly string[] | "any";
  /** The operator's option values no caller may change. */
  pinned: Readonly<Record<string, string | boolean>>;
}

/**
 * Whether the operator's permission policy would stop anything: a mode that
 * switches the agent's prompts off would get past it.
 */
function holdsPermissions(operator: RunConfig): boolean {
  return !operator.permissionDecision.startsWith("allow") ||
    operator.permissionRulesJson.length > 0;
}

function withOwn(list: readonly string[], own: string | undefined): string[] {
  return own === undefined || list.includes(own) ? [...list] : [...list, own];
}

/** What the operator's config lets callers choose of the session's values. */
export function sessionChoicesOf(operator: RunConfig): SessionChoices {
  const guarded = operator.mode !== undefined || holdsPermissions(operator);
  const modes = operator.callerModes.length
    ? withOwn(operator.callerModes, operator.mode)
    : guarded
    ? withOwn([], operator.mode)
    : "any";
  const models = operator.callerModels.length
    ? withOwn(operator.callerModels, operator.model)
    : operator.model !== undefined
    ? [operator.model]
    : "any";
  const keys = operator.callerSessionConfigKeys;
  const pinned = Object.fromEntries(
    Object.entries(operator.sessionConfigJson).filter(([id]) =>
      !keys.includes(id)
    ),
  );
  return {
    modes,
    models,
    configKeys: keys.length ? [...keys] : guarded ? [] : "any",
    pinned,
  };
}

/** The session values a caller (or a remembered conversation) asks for. */
export interface AskedSessionValues {
  /** The model asked for. */
  model?: string;
  /** The mode asked for. */
  mode?: string;
  /** Option id → value asked for. */
  config: Record<string, string | boolean>;
}

/** The first value of `asked` the choices refuse, as `[key, message]`. */
function sessionProblem(
  choices: SessionChoices,
  asked: AskedSessionValues,
): [string, string] | undefined {
  const offList = (list: readonly string[] | "any", value: unknown) =>
    list !== "any" && !list.includes(String(value));
  const listed = (list: readonly string[] | "any", flag: string) =>
    list === "any" || !list.length
      ? `the operator lets requests choose none (--${flag})`
      : `a request may choose ${list.join(", ")} (--${flag})`;
  if (asked.mode !== undefined && offList(choices.modes, asked.mode)) {
    return [
      "mode",
      `${asked.mode} is not a mode callers may choose: ${
        listed(choices.modes, "caller-modes")
      }. A mode can switch the agent's permission prompts off, so it is the operator's.`,
    ];
  }
  if (asked.model !== undefined && offList(choices.models, asked.model)) {
    return [
      "model",
      `${asked.model} is not a model callers may choose: ${
        listed(choices.models, "caller-models")
      }.`,
    ];
  }
  for (const [id, value] of Object.entries(asked.config)) {
    const pinned = Object.hasOwn(choices.pinned, id);
    if (pinned && choices.pinned[id] === value) continue;
    const asKey = id === "mode"
      ? choices.modes
      : id === "model"
      ? choices.models
      : undefined;
    const offKeys = choices.configKeys !== "any" &&
      !choices.configKeys.includes(id);
    if (
      pinned || (asKey !== undefined ? offList(asKey, value) : offKeys)
    ) {
      return [
        "session-config-json",
        `${id} is ${
          pinned ? "pinned by the operator" : "not an option callers may set"
        }: ${
          listed(
            asKey ?? choices.configKeys,
            asKey === undefined
              ? "caller-session-config-keys"
              : `caller-${id}s`,
          )
        }.`,
      ];
    }
  }
  return undefined;
}

/**
 * Refuses a session value the operator does not let callers choose.
 *
 * @throws {RunnerError} `http.forbidden` naming `mode`, `model` or
 * `session-config-json`.
 */
export function checkSessionChoices(
  choices: SessionChoices,
  asked: AskedSessionValues,
): void {
  const problem = sessionProblem(choices, asked);
  if (problem) throw refused(problem[0], problem[1]);
}

/**
 * The remembered session values a run may still ask for under `choices`
 * (what a caller could not ask for now is forgotten), and the names dropped.
 */
export function flooredMemory(
  choices: SessionChoices,
  remembered: SessionSettings,
): { settings: SessionSettings; dropped: string[] } {
  const settings: SessionSettings = {};
  const dropped: string[] = [];
  const keep = (asked: AskedSessionValues) => !sessionProblem(choices, asked);
  if (remembered.model !== undefined) {
    if (keep({ model: remembered.model, config: {} })) {
      settings.model = remembered.model;
    } else dropped.push("model");
  }
  if (remembered.mode !== undefined) {
    if (keep({ mode: remembered.mode, config: {} })) {
      settings.mode = remembered.mode;
    } else dropped.push("mode");
  }
  const config: Record<string, string | boolean> = {};
  for (const [id, value] of Object.entries(remembered.config ?? {})) {
    if (keep({ config: { [id]: value } })) config[id] = value;
    else dropped.push(id);
  }
  if (Object.keys(config).length) settings.config = config;
  return { settings, dropped };
}

/** Whether `own` (a run's values) sets `name` (`model`, `mode` or an option id) itself. */
function setsItself(own: SessionConfigValues, name: string): boolean {
  const asKey = name === "model" ? own.model : name === "mode" ? own.mode : "";
  return Boolean(asKey) || Object.hasOwn(own.sessionConfigJson ?? {}, name);
}

/**
 * Why the conversation's stored session may not be restored under
 * `choices`: it remembers values a caller could not ask for now, which the
 * run does not set itself, so a restored session would keep them in force
 * (an agent restores its mode with the session). Undefined: it may.
 */
export function restoreRefusal(
  choices: SessionChoices,
  remembered: SessionSettings,
  own: SessionConfigValues,
): string | undefined {
  const kept = flooredMemory(choices, remembered).dropped
    .filter((name) => !setsItself(own, name));
  if (!kept.length) return undefined;
  return `the stored session was configured with ${kept.join(", ")} ${
    kept.length === 1 ? "as" : "as values"
  } the operator no longer lets requests choose, and restoring it would keep ${
    kept.length === 1 ? "that value" : "them"
  } in force; a new session starts instead`;
}

/** `docs/http-api.md`'s table of what a caller may set, as Markdown (before `deno fmt`). */
export function callerFloorTableMarkdown(): string {
  return [
    "| key | a caller may set it | why it cannot widen access |",
    "| --- | --- | --- |",
    ...CALLER_KEY_FLOORS.map(({ key, rule, why }) =>
      `| \`${key}\` | ${rule} | ${why} |`
    ),
  ].join("\n") + "\n";
}
