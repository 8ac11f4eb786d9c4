/**
 * The run config, described once: every kebab-case key with its type,
 * default, limits, allowed values, description and the message a bad value
 * gets. `lib/config.ts` validates with it, `/openapi.json` shows it and
 * `docs/config.md`'s table is checked against it (`deno task config-table`
 * prints that table).
 *
 * @module
 */

import { isAbsolute, win32 } from "node:path";
import { z } from "zod";

/** The official ACP agent registry (`docs/registry.md`). */
export const DEFAULT_REGISTRY_URL =
  "https://cdn.agentclientprotocol.com/registry/v1/latest/registry.json";

/** An https:// or file:// URL, or http:// on a loopback address: what `registry-url` accepts. */
export function isRegistryUrl(value: string): boolean {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return false;
  }
  if (url.protocol === "https:" || url.protocol === "file:") return true;
  return url.protocol === "http:" &&
    ["127.0.0.1", "[::1]", "localhost"].includes(url.hostname);
}

/** The longest duration a JavaScript timer can wait, in whole seconds. */
export const MAX_TIMER_SECONDS = 2_147_483;

/** The largest `terminal-output-bytes` (64 MiB). */
export const MAX_TERMINAL_OUTPUT_BYTES = 64 * 1024 * 1024;

/** How a key's value is read when it arrives as text (a flag, a variable, a query parameter). */
export type ConfigKind =
  | "string"
  | "bool"
  | "number"
  | "env"
  | "list"
  | "json-text"
  | "json"
  | "permission";

/** One run-config key: its schema and how the docs show its default. */
export interface ConfigKeySpec {
  /** Type, default, limits, description and messages (built on first use). */
  readonly schema: z.ZodType;
  /** How a text value is turned into the schema's type first. */
  kind: ConfigKind;
  /** The schema's default, known without building the schema. */
  readonly fallback?: unknown;
  /** The docs' default column when it is not the schema's default (e.g. "(required)"). */
  docDefault?: string;
}

/** What {@linkcode key} makes a key's schema from. */
interface KeyOptions {
  /** The default (none: the key is optional). */
  fallback?: unknown;
  /** The docs' meaning column. */
  description: string;
  /** The docs' default column, when not the default itself. */
  docDefault?: string;
}

/**
 * A key whose schema is built from `base` on first use, with its default (or
 * as optional) and description: a run gives a handful of keys, and building
 * every schema up front costs each command's start-up time and memory.
 */
function key(
  kind: ConfigKind,
  base: () => z.ZodType,
  options: KeyOptions,
): ConfigKeySpec {
  let schema: z.ZodType | undefined;
  return {
    kind,
    fallback: options.fallback,
    docDefault: options.docDefault,
    get schema() {
      schema ??=
        (options.fallback === undefined
          ? base().optional()
          : base().default(options.fallback as never)).describe(
            options.description,
          );
      return schema;
    },
  };
}

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

function seconds(
  fallback: number,
  description: string,
  max = MAX_TIMER_SECONDS,
): ConfigKeySpec {
  return key("number", () => positive(max), { fallback, description });
}

function positive(max?: number) {
  const number = z.number({ error: "must be a number" })
    .gt(0, { error: "must be greater than 0" });
  return max === undefined
    ? number
    : number.max(max, { error: `must be at most ${max}` });
}

function nonNegative(max: number) {
  return z.number({ error: "must be a number" })
    .min(0, { error: "must be at least 0" })
    .max(max, { error: `must be at most ${max}` });
}

function bool(fallback: boolean, description: string): ConfigKeySpec {
  return key("bool", () => z.boolean({ error: "must be true or false" }), {
    fallback,
    description,
  });
}

function text(description: string, docDefault = "—"): ConfigKeySpec {
  return key("string", () => z.string({ error: "must be a string" }), {
    description,
    docDefault,
  });
}

function choice<const T extends readonly [string, ...string[]]>(
  values: T,
  fallback: T[number],
  description: string,
): ConfigKeySpec {
  return key(
    "string",
    () => z.enum(values, { error: `must be one of ${values.join(", ")}` }),
    { fallback, description },
  );
}

function permission(
  values: readonly [string, ...string[]],
  fallback: string,
  description: string,
): ConfigKeySpec {
  const listed = `${values.slice(0, -1).join(", ")} or ${values.at(-1)}`;
  return key(
    "permission",
    () => z.enum(values, { error: `must be one of ${listed}` }),
    { fallback, description },
  );
}

function port(description: string, fallback?: number): ConfigKeySpec {
  const message = { error: "must be a port number 0-65535" };
  return key(
    "number",
    () =>
      z.number({ error: "must be a number" }).int(message).min(0, message)
        .max(65535, message),
    {
      fallback,
      description,
      docDefault: fallback === undefined ? "—" : undefined,
    },
  );
}

/** Decisions a permission rule may name. */
export const RULE_DECISIONS = [
  "allow",
  "reject",
  "ask",
  "allow_once",
  "allow_always",
  "reject_once",
  "reject_always",
] as const;

/** Why a rule cannot be used as written, or undefined. */
function ruleProblem(rule: {
  kind?: string | string[];
  title?: string;
  command?: string[];
  env?: Record<string, string>;
}): string | undefined {
  if (rule.env !== undefined && rule.command === undefined) {
    return 'env belongs to a command rule: write {"command": ["git", "status"], "env": {"PATH": "**"}, …}';
  }
  if (rule.command === undefined) return undefined;
  if (rule.title !== undefined) {
    return "a rule has command or title, not both: command matches a terminal command's argv, title a tool call's title";
  }
  const kinds = rule.kind === undefined
    ? ["execute"]
    : Array.isArray(rule.kind)
    ? rule.kind
    : [rule.kind];
  if (!kinds.includes("execute")) {
    return "a command rule matches client terminal commands only, which are of kind execute: drop kind or include execute";
  }
  const [program, ...args] = rule.command;
  if (!program || program === "...") {
    return 'command must start with the program: ["git", "status"]';
  }
  if (args.slice(0, -1).includes("...")) {
    return 'in command, "..." (any further arguments) may only come last';
  }
  const bad = Object.keys(rule.env ?? {}).find((name) =>
    !/^[^=\0]+$/.test(name)
  );
  if (bad !== undefined) return `env: "${bad}" is not a variable name`;
  return undefined;
}

function permissionRules() {
  const text = z.string({ error: "must be a string" });
  return z.array(
    z.strictObject({
      kind: z.union([text, z.array(text)], {
        error: "kind must be a tool kind or a list of them",
      }).optional(),
      title: text.optional(),
      path: text.optional(),
      command: z.array(text, {
        error:
          'command must be a list of globs: the program, then one per argument ("..." last for any further ones)',
      }).min(1, { error: "command must name a program" }).optional(),
      env: z.record(z.string(), text, {
        error: "env must be an object of variable name: value glob",
      }).optional(),
      decision: z.enum(RULE_DECISIONS, {
        error: `decision must be one of ${RULE_DECISIONS.join(", ")}`,
      }),
    }, {
      error:
        "every rule must be an object {kind?, title?, path?, command?, env?, decision}",
    }).superRefine((rule, context) => {
      const problem = ruleProblem(rule);
      if (problem) context.addIssue({ code: "custom", message: problem });
    }),
    { error: "must be a JSON array of rules" },
  );
}

/** An absolute path of this machine's kind, `~` or `~/…`. */
export function isPosixStylePath(path: string): boolean {
  return isAbsolute(path) || path === "~" || path.startsWith("~/");
}

/** A Windows absolute path (`C:\…`, `C:/…`, `\\server\share`) or `~\…`. */
export function isWindowsStylePath(path: string): boolean {
  return win32.isAbsolute(path) || path.startsWith("~\\");
}

/** Windows-style paths pass here; `parseRunConfig` keeps them to PowerShell remotes. */
function path(description: string, docDefault: string): ConfigKeySpec {
  return key(
    "string",
    () =>
      z.string({ error: "must be a non-empty path" })
        .min(1, { error: "must be a non-empty path" })
        .refine(
          (value) => isPosixStylePath(value) || isWindowsStylePath(value),
          {
            error: (issue) => `must be an absolute path (got "${issue.input}")`,
          },
        ),
    { description, docDefault },
  );
}

function list(description: string): ConfigKeySpec {
  return key("list", () => z.array(z.string()), {
    fallback: [],
    description,
  });
}

const AT_MOST = (max: number) => `; at most ${max}`;

/** Every run-config key, in the order of `docs/config.md`. */
export const RUN_CONFIG_SPEC: Record<string, ConfigKeySpec> = {
  "provider": key("string", () => z.string({ error: "must be a string" }), {
    description:
      "a preset or a registry agent's id from `runner providers` (`docs/registry.md`), or `custom`",
    docDefault: "(required)",
  }),
  "location": choice(
    ["local", "remote-ssh", "daemon"],
    "local",
    "`local`, `remote-ssh` or `daemon`",
  ),
  "workspace": path(
    "the agent's working directory: absolute or starting with `~/` (see below); on the remote machine for remote-ssh/daemon; created if missing",
    "(required for local)",
  ),
  "workspace-roots": list(
    "directories a caller's `workspace` must lie in (by real path; list or comma-separated); unset: the operator's own `workspace` and below, or, with no `workspace` either, anywhere under `sandbox=off` and nowhere under `confined`; never the data dir, `$HOME`, `/`, a parent of them or the runner's own files (`docs/http-api.md`, \"What a caller may set\"); operator only",
  ),
  "session-cwd": path(
    "the ACP session's `cwd`, when it differs from where the process starts (same path rules as `workspace`)",
    "`workspace`",
  ),
  "acp-command": text(
    "the agent command, split like Python's `shlex.split` (no shell runs); required for `custom`",
    "the preset's",
  ),
  "provider-version": text(
    "with a registry agent as `provider`: the version to run (installed, or the registry's current one); unset: the registry's current version",
    "the registry's",
  ),
  "registry-url": key(
    "string",
    () =>
      z.string({ error: "must be a string" }).refine(isRegistryUrl, {
        error:
          "must be an https:// URL, a file:// URL or http:// on a loopback address (127.0.0.1, [::1], localhost)",
      }),
    {
      fallback: DEFAULT_REGISTRY_URL,
      docDefault: "the official one",
      description:
        "the ACP agent registry that `provider` ids are looked up in (`docs/registry.md`): https://, file:// (an air-gapped mirror) or http:// on loopback; operator only",
    },
  ),
  "registry-refresh": seconds(
    3600,
    "seconds a cached registry is used before it is fetched again (offline, the cache serves and says its age)" +
      AT_MOST(MAX_TIMER_SECONDS),
  ),
  "env-json": key(
    "env",
    () =>
      z.record(
        z.string().regex(NAME, {
          error: (issue) =>
            `"${issue.input}" is not a valid environment variable name`,
        }),
        z.string({ error: "must be a string" }),
      ),
    {
      fallback: {},
      description:
        'JSON object of extra environment for the agent; values under secret-looking names are redacted (`docs/permissions.md`, "Secrets")',
    },
  ),
  "secret-env-names": list(
    "more variable names whose values are secrets and redacted (list or comma-separated), e.g. `CORP_SSO`; operator only",
  ),
  "reuse-session": bool(true, "resume/load the conversation's stored session"),
  "create-session-if-missing": bool(
    true,
    "start a new session when none is stored or the stored one cannot be restored (else `acp.session_missing`)",
  ),
  "streaming": bool(
    true,
    "emit deltas and progress events; `false` emits only the final message",
  ),
  "startup-timeout": seconds(
    60,
    "seconds until the agent is ready (process, `initialize`, session)" +
      AT_MOST(MAX_TIMER_SECONDS),
  ),
  "initialize-timeout": seconds(
    30,
    "seconds for the `initialize` answer" + AT_MOST(MAX_TIMER_SECONDS),
  ),
  "timeout": seconds(
    600,
    "seconds for the whole run" + AT_MOST(MAX_TIMER_SECONDS),
  ),
  "cancel-grace": seconds(
    3,
    "seconds to wait for `stopReason: cancelled` before killing the agent" +
      AT_MOST(5),
    5,
  ),
  "late-update-ms": key("number", () => nonNegative(5000), {
    fallback: 150,
    description:
      "how long (ms) the agent may stay quiet between straggling updates after the prompt answer (the wait ends after 10 ms without any); `0` = none (the run ends with the answer); at most 5000 (`docs/runs.md`)",
  }),
  "replay-quiet-ms": key("number", () => positive(5000), {
    fallback: 200,
    description:
      "after `session/load`: the replay counts as over once the agent has sent nothing for this long (ms; at most 10 × that in all); at most 5000",
  }),
  "delta-coalesce-ms": key("number", () => nonNegative(10_000), {
    fallback: 25,
    description:
      "chunks arriving within this many ms after a delta become one delta; `0` = one delta per chunk; at most 10000 (`docs/events.md`)",
  }),
  "max-message-mb": key("number", () => positive(), {
    fallback: 64,
    description: "largest single ACP message accepted from the agent",
  }),
  "max-attachment-mb": key("number", () => positive(), {
    fallback: 10,
    description: "largest decoded attachment",
  }),
  "max-prompt-mb": key("number", () => positive(), {
    fallback: 25,
    description: "largest total of decoded attachments in one prompt",
  }),
  "permission-decision": permission(
    ["ask", "allow_once", "allow_always", "reject_once", "reject_always"],
    "allow_once",
    "`ask` (a person answers: `permission.requested`, then `POST /v1/runs/{id}/permissions/{request_id}`, the console or the `runner run` terminal prompt), `allow_once`, `allow_always`, `reject_once`, `reject_always`",
  ),
  "permission-timeout": seconds(
    120,
    "seconds an `ask` request waits for an answer before `permission-fallback` decides it" +
      AT_MOST(MAX_TIMER_SECONDS),
  ),
  "permission-fallback": permission(
    ["allow_once", "allow_always", "reject_once", "reject_always"],
    "reject_once",
    "the decision when nobody answers in time, and wherever nobody can answer (n8n webhook, a daemon or hub without the `permission.ask` capability, `runner run` with no terminal); a rejection is never turned into an approval",
  ),
  "model": text(
    'the session\'s model: an id the agent advertises (`runner probe` lists them), set with `session/set_config_option` (or `session/set_model`) before the first prompt; a value not offered fails the run with `acp.config_unavailable`; the conversation remembers it for its later runs (`docs/runs.md`, "Remembered per conversation")',
  ),
  "mode": text(
    "the session's mode (e.g. `plan`): an id the agent advertises, set with `session/set_config_option` (or `session/set_mode`) before the first prompt; remembered per conversation like `model`",
  ),
  "session-config-json": key(
    "json",
    () =>
      z.record(
        z.string(),
        z.union([z.string(), z.boolean()], {
          error: "values must be strings or true/false",
        }),
        { error: "must be a JSON object of option id: value" },
      ),
    {
      fallback: {},
      description:
        'JSON object of more session config options, option id → value (e.g. `{"effort":"low"}`), set after `model` and `mode` in the given order (`docs/runs.md`, "Session config options"); remembered per conversation like `model`',
    },
  ),
  "caller-models": list(
    "`model` values a caller may choose (list or comma-separated); unset: any when the operator set no `model`, else only the operator's; operator only",
  ),
  "caller-modes": list(
    "`mode` values a caller may choose; unset: any only while the operator set no `mode` and its permission policy approves anyway (no `ask`, rejection or rules: there is no prompt a mode could switch off), else only the operator's; operator only",
  ),
  "caller-session-config-keys": list(
    "`session-config-json` option ids a caller may set, over the operator's object key by key; unset: any id the operator did not set, under the same condition as `caller-modes` (`mode` and `model` ids are judged as those keys); operator only",
  ),
  "permission-rules-json": key("json", () => permissionRules(), {
    fallback: [],
    description:
      'JSON array of rules `{kind?, title?, path?, command?, env?, decision}` for permission requests, client terminal commands and `fs/write_text_file`: `kind` a tool kind or a list of those, `title` and `path` globs (`*`, `**`, `?`; paths relative to the workspace), `command` and `env` a terminal command\'s argv and variables (`docs/permissions.md`, "Terminal rules"), `decision` `allow`, `reject`, `ask`, or an exact kind; the first match decides (`docs/runs.md`, "Permission rules")',
  }),
  "auth-method": text(
    "an `authMethods` id the agent lists in `initialize` (`runner probe` shows them): the runner calls `authenticate` with it before the session; its credentials come from the agent's environment (`env-json`)",
  ),
  "fs-read": bool(
    false,
    "advertise and serve `fs/read_text_file` inside the workspace (by real path, see below); refused with `location=remote-ssh`",
  ),
  "fs-write": bool(
    false,
    "advertise and serve `fs/write_text_file` inside the workspace (by real path, see below); refused with `location=remote-ssh`",
  ),
  "client-terminals": bool(
    false,
    "advertise the `terminal` client capability and run the agent's `terminal/create` commands on the runner's machine: cwd inside the workspace (by real path), the agent's environment and sandbox, permission policy first, killed with the run (`docs/permissions.md`, \"Client terminals\"); refused with `location=remote-ssh`; an HTTP caller may set it `true` only when the operator did, a daemon runs terminals only with `runner daemon --client-terminals true`",
  ),
  "terminal-timeout": seconds(
    600,
    "seconds one client terminal command may run before its process group is killed; an HTTP caller may only lower the operator's, a daemon caps it at its `--terminal-timeout`" +
      AT_MOST(MAX_TIMER_SECONDS),
  ),
  "terminal-output-bytes": key(
    "number",
    () =>
      z.number({ error: "must be a number" })
        .int({ error: "must be a whole number of bytes" })
        .gt(0, { error: "must be greater than 0" })
        .max(MAX_TERMINAL_OUTPUT_BYTES, {
          error: `must be at most ${MAX_TERMINAL_OUTPUT_BYTES}`,
        }),
    {
      fallback: 1_048_576,
      description:
        "the most output bytes kept per client terminal (older output is dropped from the start, `truncated: true`), and the most sent as `terminal.output` events (`stopped: true` on the last), four times it the most of all the run's terminals together (`run_limit: true` on the last); the agent's `outputByteLimit` can only lower what is kept" +
        AT_MOST(MAX_TERMINAL_OUTPUT_BYTES),
    },
  ),
  "append-run-scope-prompt": bool(
    false,
    "prepend a short run-scope note (run id, available assets) to the first prompt",
  ),
  "mcp-servers-json": key("json-text", () => z.string(), {
    description:
      "the user's own MCP servers: a JSON array or `{mcpServers:{…}}`, given as JSON text or as a JSON value",
    docDefault: "—",
  }),
  "langbot-assets-enabled": bool(
    true,
    "inject the run-scoped LangBot assets MCP server",
  ),
  "langbot-assets-mode": choice(
    ["auto", "ephemeral", "gateway"],
    "auto",
    "`auto` (= ephemeral), `ephemeral` or `gateway`",
  ),
  "langbot-assets-gateway-host": key(
    "string",
    () => z.string({ error: "must be a string" }),
    {
      fallback: "127.0.0.1",
      description: "gateway listen host (operator only)",
    },
  ),
  "langbot-assets-gateway-port": port(
    "gateway port (fixed, so other platforms can register it; operator only)",
  ),
  "langbot-assets-gateway-public-url": text(
    "externally reachable gateway MCP URL (operator only)",
  ),
  "langbot-assets-token-ttl": seconds(
    3600,
    "seconds a run token lives" + AT_MOST(MAX_TIMER_SECONDS),
  ),
  "mcp-bridge-transport": choice(
    ["ssh-tunnel", "http"],
    "ssh-tunnel",
    "how a remote-ssh agent reaches its assets: `ssh-tunnel` (`ssh -R`) or `http` (`mcp-public-url`; see below; operator only)",
  ),
  "mcp-bridge-host": key(
    "string",
    () => z.string({ error: "must be a string" }),
    {
      fallback: "127.0.0.1",
      description:
        "with `http`: the shared bridge's listen host, e.g. `0.0.0.0` (operator only)",
    },
  ),
  "mcp-bridge-port": port(
    "with `http`: the shared bridge's fixed port (required unless `langbot-assets-mode=gateway`; operator only)",
  ),
  "mcp-public-url": text(
    "with `http`: the bridge's `/mcp` URL as the agent's machine reaches it (required; operator only)",
  ),
  "sandbox": choice(
    ["off", "confined"],
    "off",
    "`off` (the agent has the runner user's rights) or `confined` (bubblewrap: the agent sees its workspace, its own state directories and the system directories; local and daemon runs; `docs/sandbox.md`)",
  ),
  "sandbox-network": choice(
    ["full", "none", "host"],
    "full",
    "with `sandbox=confined`: `full` (a network namespace of its own through pasta: the internet and the run's assets endpoint, never the host's loopback), `none` (no network at all, the run's assets endpoint included: needs `langbot-assets-enabled=false`) or `host` (the host's network namespace, every loopback service of the host included: only when you accept that risk)",
  ),
  "sandbox-read-paths": list(
    "with `sandbox=confined`: more paths the agent may read (absolute or `~/…`, list or comma-separated); operator only",
  ),
  "sandbox-write-paths": list(
    "with `sandbox=confined`: more paths the agent may read and write (absolute or `~/…`); operator only",
  ),
  "knowledge-bases": list("knowledge base ids granted for retrieval"),
  "ssh-target": text("`user@host` for remote-ssh"),
  "ssh-port": port("SSH port", 22),
  "ssh-identity-file": text("private key on the runner's machine"),
  "ssh-connect-timeout": seconds(
    15,
    "seconds for the SSH connection" + AT_MOST(MAX_TIMER_SECONDS),
  ),
  "ssh-extra-options": list(
    "extra `-o` options (`Key=value`, list or comma-separated)",
  ),
  "remote-shell": choice(
    ["bash", "powershell"],
    "bash",
    "the remote wrapper: `bash` (Linux, macOS) or `powershell` (Windows; see `docs/transport.md`)",
  ),
  "daemon-id": text("the daemon to run on, for `location=daemon`"),
  "daemon-connect-timeout": seconds(
    30,
    "seconds to wait for that daemon to come online" +
      AT_MOST(MAX_TIMER_SECONDS),
  ),
};

/** The default of a key's schema, or undefined when it has none. */
export function schemaDefault(schema: z.ZodType): unknown {
  const def = schema.def as { type: string; defaultValue?: unknown };
  return def.type === "default" ? structuredClone(def.defaultValue) : undefined;
}

/** A key's description (the docs' meaning column). */
export function schemaDescription(schema: z.ZodType): string {
  return schema.description ?? "";
}
