/**
 * What a client terminal's command really runs, as the permission rules see
 * it: the command itself, then the command behind each wrapper the runner
 * can read (`env`, `sh -c`/`bash -c` with a one-command script, `nice`,
 * `nohup`, `timeout`, `xargs`, `command`, `exec`), each with the variables
 * set so far. Where the runner cannot know what runs next (inline code for
 * an interpreter, a script that is more than one plain command, an option it
 * does not know, a program looked up on a `PATH` the command changed) the
 * layers end there, unknown. See `docs/permissions.md`, "Terminal rules".
 *
 * @module
 */

import { basename, isAbsolute, resolve } from "node:path";
import { findOnPath } from "../agent/find_executable.ts";
import {
  type EnvAssignment,
  isShellWord,
  parseSimpleCommand,
} from "./shell_simple_command.ts";

/** One program in the chain: a wrapper, or what finally runs. */
export interface CommandLayer {
  /** The program as it was named (`git`, `/usr/bin/git`, `./build.sh`). */
  name: string;
  /** The file that runs (absolute); undefined when it cannot be known. */
  program?: string;
  /** Its arguments. */
  args: string[];
  /** Every variable set up to here (the request's, `env`'s, a script's), in order. */
  env: EnvAssignment[];
  /** Whether arguments the runner cannot see follow `args` (`xargs`). */
  openArgs: boolean;
}

/** A command's layers, the outermost (what the runner starts) first. */
export interface CommandLayers {
  /** The layers; never empty. */
  layers: CommandLayer[];
  /** Whether the last layer is what finally runs (false: behind it is something the runner cannot read). */
  known: boolean;
  /** The agent's `PATH`, where a rule's bare program names are looked up. */
  agentPath?: string;
}

/** What {@linkcode commandLayers} reads. */
export interface CommandLayersInput {
  /** The program as the request named it. */
  command: string;
  /** The file the runner starts (absolute). */
  program: string;
  /** Its arguments. */
  args: readonly string[];
  /** The request's variables, in order. */
  env: readonly EnvAssignment[];
  /** The agent's `PATH`. */
  agentPath?: string;
  /** The command's working directory (absolute). */
  cwd: string;
}

/** The most wrappers looked through (`nice nice nice …`). */
const MAX_DEPTH = 16;

/** What a wrapper runs: `none` (the wrapper runs nothing else), `opaque` (unknown), or the next command. */
type Unwrapped =
  | { kind: "none" }
  | { kind: "opaque" }
  | {
    kind: "inner";
    name: string;
    args: string[];
    env?: EnvAssignment[];
    /** `env -i`: the environment starts empty. */
    clear?: boolean;
    openArgs?: boolean;
    /** The next command came from a shell script (its builtins `exec` and `command` apply). */
    fromShell?: boolean;
  };

const NONE: Unwrapped = { kind: "none" };
const OPAQUE: Unwrapped = { kind: "opaque" };

function inner(
  args: string[],
  at: number,
  more: Partial<Extract<Unwrapped, { kind: "inner" }>> = {},
): Unwrapped {
  if (at >= args.length) return NONE;
  return { kind: "inner", name: args[at], args: args.slice(at + 1), ...more };
}

/**
 * Steps over the leading options of `args` and a `--` that ends them:
 * `valuesOf` says how many arguments follow an option as its value, or
 * undefined for an option not understood. The index of the first operand,
 * or undefined when an option was not understood.
 */
function skipOptions(
  args: string[],
  valuesOf: (option: string) => number | undefined,
): number | undefined {
  let at = 0;
  for (; at < args.length && args[at].startsWith("-"); at++) {
    if (args[at] === "--") return at + 1;
    const values = valuesOf(args[at]);
    if (values === undefined) return undefined;
    at += values;
  }
  return at;
}

/** `env [-i] [--] [NAME=VALUE…] [program args…]`. */
function unwrapEnv(args: string[]): Unwrapped {
  let clear = false;
  let at = skipOptions(args, (option) => {
    if (
      option !== "-i" && option !== "-" && option !== "--ignore-environment"
    ) return undefined;
    clear = true;
    return 0;
  });
  if (at === undefined) return OPAQUE;
  const env: EnvAssignment[] = [];
  for (; at < args.length && args[at].includes("="); at++) {
    const split = args[at].indexOf("=");
    if (split === 0) return OPAQUE;
    env.push({
      name: args[at].slice(0, split),
      value: args[at].slice(split + 1),
    });
  }
  return inner(args, at, { env, clear });
}

const INTEGER = /^[+-]?\d+$/;

/** `nice [-n N | -nN | --adjustment=N | -N] [--] program args…`. */
function unwrapNice(args: string[]): Unwrapped {
  let at = 0;
  const first = args[0] ?? "";
  if (
    (first === "-n" || first === "--adjustment") && INTEGER.test(args[1] ?? "")
  ) at = 2;
  else if (
    /^-n[+-]?\d+$/.test(first) || /^--adjustment=[+-]?\d+$/.test(first) ||
    /^-\d+$/.test(first)
  ) at = 1;
  if (args[at] === "--") at++;
  else if (args[at]?.startsWith("-")) return OPAQUE;
  return inner(args, at);
}

/**
 * `nohup [--] program args…`, and the shell builtins `command [--] program
 * args…` and `exec [--] program args…`: any option (`command -v`, `command
 * -p` with another PATH, `exec -a name`, …) makes it opaque.
 */
function unwrapWithoutOptions(args: string[]): Unwrapped {
  const at = args[0] === "--" ? 1 : 0;
  if (args[at]?.startsWith("-")) return OPAQUE;
  return inner(args, at);
}

/** `timeout [-s SIG] [-k DURATION] [--preserve-status] [--foreground] [-v] DURATION program args…`. */
function unwrapTimeout(args: string[]): Unwrapped {
  const at = skipOptions(args, (option) => {
    if (
      option === "-s" || option === "-k" || option === "--signal" ||
      option === "--kill-after"
    ) return 1;
    if (
      /^(-s.|-k.|--signal=|--kill-after=)/.test(option) ||
      ["--preserve-status", "--foreground", "-v", "--verbose"].includes(option)
    ) return 0;
    return undefined;
  });
  if (at === undefined) return OPAQUE;
  if (!/^\d+(\.\d+)?[smhd]?$/.test(args[at] ?? "")) return OPAQUE;
  const next = inner(args, at + 1);
  return next.kind === "none" ? OPAQUE : next;
}

/** `xargs [-r] [--] program args…`: arguments read from stdin follow. */
function unwrapXargs(args: string[]): Unwrapped {
  const at = skipOptions(
    args,
    (option) =>
      option === "-r" || option === "--no-run-if-empty" ? 0 : undefined,
  );
  if (at === undefined) return OPAQUE;
  // Without a program xargs runs `echo`: not worth reading.
  const next = inner(args, at, { openArgs: true });
  return next.kind === "none" ? OPAQUE : next;
}

/**
 * `sh -c SCRIPT [name args…]` (options from `-c`, `-e`, `-u`, `-x`, `-v`)
 * with a script that is one simple command; a shell without `-c` runs a file
 * and is itself what runs.
 */
function unwrapShell(args: string[]): Unwrapped {
  let at = 0;
  let script = false;
  let plain = true;
  for (; at < args.length && /^[-+]/.test(args[at]); at++) {
    if (args[at] === "--" || args[at] === "-") {
      at++;
      break;
    }
    if (/^-[^-]*c/.test(args[at])) script = true;
    if (!/^-[ceuxv]+$/.test(args[at])) plain = false;
  }
  if (!script) return NONE;
  if (!plain || at >= args.length) return OPAQUE;
  const parsed = parseSimpleCommand(args[at]);
  if (!parsed) return OPAQUE;
  const [name, ...rest] = parsed.argv;
  return {
    kind: "inner",
    name,
    args: rest,
    env: parsed.env,
    fromShell: true,
  };
}

/** An interpreter that runs code given inline, in any argument: what runs cannot be read. */
function interpreter(code: RegExp): (args: string[]) => Unwrapped {
  return (args) => args.some((arg) => code.test(arg)) ? OPAQUE : NONE;
}

const SHELLS = ["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "rbash"];

/** Wrappers by program name; each is read only when the file is that name's on the agent's `PATH`. */
const WRAPPERS: Record<string, (args: string[]) => Unwrapped> = {
  env: unwrapEnv,
  nice: unwrapNice,
  nohup: unwrapWithoutOptions,
  timeout: unwrapTimeout,
  xargs: unwrapXargs,
  ...Object.fromEntries(SHELLS.map((name) => [name, unwrapShell])),
  node: interpreter(
    /^(-[^-]*[ep]|--(eval|print|import|require|loader|experimental-loader)\b)/,
  ),
  nodejs: interpreter(
    /^(-[^-]*[ep]|--(eval|print|import|require|loader|experimental-loader)\b)/,
  ),
  perl: interpreter(/^-[^-]*[eEMmx]/),
  ruby: interpreter(/^-[^-]*e/),
  php: interpreter(/^-[^-]*[rBREd]/),
};

function wrapperFor(name: string): ((args: string[]) => Unwrapped) | undefined {
  if (/^python[\d.]*$/.test(name)) return interpreter(/^-[^-]*c/);
  return Object.hasOwn(WRAPPERS, name) ? WRAPPERS[name] : undefined;
}

function realPath(path: string): string | undefined {
  try {
    return Deno.realPathSync(path);
  } catch {
    return undefined;
  }
}

/**
 * Whether `program` is the file `name` finds on the agent's `PATH` and is
 * called by that name (a multi-call binary acts on the name it is called by).
 */
export function isProgramNamed(
  program: string,
  name: string,
  agentPath: string | undefined,
): boolean {
  if (basename(program) !== name) return false;
  const found = findOnPath(name, agentPath);
  if (found === undefined) return false;
  const real = realPath(program);
  return real !== undefined && real === realPath(found);
}

/** A `PATH` on which a shell and `findOnPath` agree: absolute entries only. */
function plainPath(path: string | undefined): boolean {
  return path !== undefined && path.split(":").every((dir) => isAbsolute(dir));
}

function lastValue(env: readonly EnvAssignment[], name: string) {
  return env.findLast((entry) => entry.name === name)?.value;
}

/**
 * The layers of a checked command: the command, then what each wrapper it
 * names runs, as far as that can be known.
 */
export function commandLayers(input: CommandLayersInput): CommandLayers {
  const { agentPath, cwd } = input;
  let env = [...input.env];
  // The PATH the running program has (wrappers look programs up on it).
  let path = lastValue(env, "PATH") ?? agentPath;
  let layer: CommandLayer = {
    name: input.command,
    program: input.program,
    args: [...input.args],
    env: [...env],
    openArgs: false,
  };
  let fromShell = false;
  const layers: CommandLayer[] = [];
  for (let depth = 0; depth < MAX_DEPTH; depth++) {
    layers.push(layer);
    const { program } = layer;
    if (program === undefined) return { layers, known: false, agentPath };
    const name = basename(program);
    const builtin: boolean = fromShell && (layer.name === "exec" ||
      layer.name === "command");
    const unwrap: ((args: string[]) => Unwrapped) | undefined = builtin
      ? unwrapWithoutOptions
      : wrapperFor(name);
    if (!unwrap || (!builtin && !isProgramNamed(program, name, agentPath))) {
      return { layers, known: true, agentPath };
    }
    const next: Unwrapped = unwrap(layer.args);
    if (next.kind === "none") return { layers, known: true, agentPath };
    if (next.kind === "opaque") return { layers, known: false, agentPath };
    const added = next.env ?? [];
    // Kept even past `env -i`: a rule must allow every variable the request set.
    env = [...env, ...added];
    // `env NAME=v cmd` and a script's `NAME=v cmd` look cmd up with v set.
    path = lastValue(added, "PATH") ?? (next.clear ? undefined : path);
    fromShell = next.fromShell === true;
    layer = {
      name: next.name,
      program: locate(next.name, { path, agentPath, cwd, fromShell }),
      args: next.args,
      env: [...env],
      openArgs: layer.openArgs || next.openArgs === true,
    };
  }
  layers.push(layer);
  return { layers, known: false, agentPath };
}

/**
 * The file a wrapper starts for `name`, or undefined when it cannot be known:
 * a bare name is looked up only on the agent's own `PATH` (unchanged, with
 * absolute entries only), never one the command set.
 */
function locate(
  name: string,
  where: {
    path: string | undefined;
    agentPath: string | undefined;
    cwd: string;
    fromShell: boolean;
  },
): string | undefined {
  if (name.includes("/")) {
    const full = resolve(where.cwd, name);
    return findOnPath(full, undefined) ? full : undefined;
  }
  if (where.fromShell && (name === "exec" || name === "command")) return name;
  if (isShellWord(name)) return undefined;
  if (where.path !== where.agentPath || !plainPath(where.agentPath)) {
    return undefined;
  }
  return findOnPath(name, where.agentPath);
}
