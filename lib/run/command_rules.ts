/**
 * How a `permission-rules-json` rule matches a client terminal's command on
 * its real argv: the program (a bare name is the file that name finds on the
 * agent's `PATH`, called by that name; a name with a `/` is a glob on the
 * path and on its real path), the arguments as a list (one glob per
 * argument, `...` last for any further ones) and the variables the command
 * sets (`env`, their own field). A rule that allows matches only what
 * finally runs, behind every wrapper, and only when that can be known; a
 * rule that rejects or asks matches any layer. See `docs/permissions.md`,
 * "Terminal rules".
 *
 * @module
 */

import { basename } from "node:path";
import type { PermissionRule } from "../config.ts";
import {
  type CommandLayer,
  type CommandLayers,
  isProgramNamed,
} from "./command_layers.ts";
import { globPattern } from "./glob.ts";

/** The element of a rule's `command` that matches any further arguments. */
export const MORE_ARGS = "...";

/** What a rule says about a command's argv. */
export interface CommandPattern {
  /** A glob on the program (see the module doc). */
  program: string;
  /** One glob per argument, in order. */
  args: string[];
  /** Whether any further arguments may follow. */
  more: boolean;
  /** Globs on the values of the variables the command may set, by name; absent: see {@linkcode commandMatches}. */
  env?: Map<string, string[]>;
}

/** A variable assignment as a title's word: `NAME=glob`. */
const ASSIGNMENT = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/s;

/**
 * What `rule` says about a terminal command's argv: its `command` and `env`,
 * or its `title` read word by word (`NAME=glob` words first, then the
 * program, then one word per argument); undefined when it says nothing.
 */
export function commandPattern(
  rule: PermissionRule,
): CommandPattern | undefined {
  if (rule.command !== undefined) {
    const [program, ...rest] = rule.command;
    const more = rest.at(-1) === MORE_ARGS;
    return {
      program,
      args: more ? rest.slice(0, -1) : rest,
      more,
      env: rule.env === undefined ? undefined : new Map(
        Object.entries(rule.env).map(([name, glob]) => [name, [glob]]),
      ),
    };
  }
  if (rule.title === undefined) return undefined;
  const words = rule.title.split(" ").filter(Boolean);
  const env = new Map<string, string[]>();
  let at = 0;
  for (; at < words.length; at++) {
    const assignment = ASSIGNMENT.exec(words[at]);
    if (!assignment) break;
    env.set(assignment[1], [...env.get(assignment[1]) ?? [], assignment[2]]);
  }
  if (at >= words.length) return undefined;
  return {
    program: words[at],
    args: words.slice(at + 1),
    more: false,
    env: env.size ? env : undefined,
  };
}

function realPath(path: string): string | undefined {
  try {
    return Deno.realPathSync(path);
  } catch {
    return undefined;
  }
}

function programMatches(
  pattern: string,
  program: string,
  agentPath: string | undefined,
): boolean {
  const glob = globPattern(pattern);
  if (pattern.includes("/")) {
    const real = realPath(program);
    return glob.test(program) && real !== undefined && glob.test(real);
  }
  const name = basename(program);
  return glob.test(name) && isProgramNamed(program, name, agentPath);
}

function argsMatch(pattern: CommandPattern, layer: CommandLayer): boolean {
  const { args } = layer;
  if (layer.openArgs && !pattern.more) return false;
  if (
    pattern.more
      ? args.length < pattern.args.length
      : args.length !== pattern.args.length
  ) return false;
  return pattern.args.every((glob, i) => globPattern(glob).test(args[i]));
}

function envMatches(
  pattern: CommandPattern,
  layer: CommandLayer,
  strict: boolean,
): boolean {
  if (pattern.env === undefined) return !strict || layer.env.length === 0;
  const allowed = pattern.env;
  return layer.env.every((entry) =>
    (allowed.get(entry.name) ?? []).some((glob) =>
      globPattern(glob).test(entry.value)
    )
  );
}

function layerMatches(
  pattern: CommandPattern,
  layer: CommandLayer,
  options: { agentPath?: string; strict: boolean },
): boolean {
  return layer.program !== undefined &&
    programMatches(pattern.program, layer.program, options.agentPath) &&
    argsMatch(pattern, layer) &&
    envMatches(pattern, layer, options.strict);
}

/**
 * Whether `pattern` matches the command. For a rule that `allows`: the last
 * layer, only when it is known, and with no variables set unless the rule
 * names them (`env`) — every variable set must be named there, its value
 * matching. For a rule that rejects or asks: any layer, whatever it sets
 * unless the rule names `env`.
 */
export function commandMatches(
  pattern: CommandPattern,
  command: CommandLayers,
  allows: boolean,
): boolean {
  const { agentPath } = command;
  if (allows) {
    const last = command.layers.at(-1)!;
    return command.known &&
      layerMatches(pattern, last, { agentPath, strict: true });
  }
  return command.layers.some((layer) =>
    layerMatches(pattern, layer, { agentPath, strict: false })
  );
}
