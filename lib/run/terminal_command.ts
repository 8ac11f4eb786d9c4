/**
 * What a client terminal's `terminal/create` asks to run, checked before the
 * permission policy sees it: `env` names that act on every dynamically linked
 * program (the loader's `LD_*`, `GCONV_PATH`, …) are refused outright, and a
 * program named without a `/` is looked up on the agent's own `PATH`, never
 * on one the request sets, so the program a rule allowed is the one that
 * runs; a program named by a relative path is the file under the command's
 * cwd. What it runs behind its wrappers is read for the rules
 * (`command_layers.ts`). See `docs/permissions.md`, "Client terminals".
 *
 * @module
 */

import * as acp from "@agentclientprotocol/sdk";
import type { CreateTerminalRequest } from "@agentclientprotocol/sdk";
import { basename, resolve } from "node:path";
import { findOnPath } from "../agent/find_executable.ts";
import { type CommandLayers, commandLayers } from "./command_layers.ts";

/**
 * Names glibc drops for setuid programs, and macOS's loader names: each can
 * make any program (bubblewrap itself, or an allowed command) load code.
 */
const LOADER_NAMES = new Set([
  "GCONV_PATH",
  "GETCONF_DIR",
  "HOSTALIASES",
  "LOCALDOMAIN",
  "LOCPATH",
  "MALLOC_TRACE",
  "NIS_PATH",
  "NLSPATH",
  "RESOLV_HOST_CONF",
  "RES_OPTIONS",
  "TZDIR",
]);

/** Whether `terminal/create` may never set `name`. */
export function refusedEnvName(name: string): boolean {
  return name.startsWith("LD_") || name.startsWith("DYLD_") ||
    LOADER_NAMES.has(name);
}

/** A checked `terminal/create`. */
export interface CheckedCommand {
  /** The program as the agent named it. */
  command: string;
  /** What is started: the agent's `PATH` lookup for a bare name, else `command` (under the cwd). */
  program: string;
  /** Its arguments. */
  args: string[];
  /** The request's own variables, in order (later entries win). */
  env: { name: string; value: string }[];
  /** The command line the policy decides on: `NAME=value … command args…`. */
  title: string;
  /**
   * For a program named by path that is the same file as its bare name on
   * the agent's `PATH` (`/usr/bin/touch`, `touch`): the line with the bare
   * name, which a `reject` rule may also match.
   */
  alias?: string;
  /** What it runs, layer by layer, for the permission rules. */
  layers: CommandLayers;
}

/**
 * Checks the request's `env` names and finds its program on `agentPath` (the
 * agent's `PATH`), or under `cwd` (the command's, absolute) for a relative
 * path; an invalid-params error for a refused name or a program that is not
 * there.
 */
export function checkCommand(
  params: CreateTerminalRequest,
  agentPath: string | undefined,
  cwd: string,
): CheckedCommand {
  const env = (params.env ?? []).map(({ name, value }) => ({ name, value }));
  const refused = env.filter((entry) =>
    refusedEnvName(entry.name) || !/^[^=\0]+$/.test(entry.name)
  );
  if (refused.length) {
    throw acp.RequestError.invalidParams(
      { env: refused.map((entry) => entry.name) },
      `terminal/create may not set ${
        refused.map((entry) => entry.name).join(", ")
      }: a loader variable (it changes what any program loads), or not a variable name`,
    );
  }
  const command = params.command;
  const program = command.includes("/")
    ? resolve(cwd, command)
    : findOnPath(command, agentPath);
  if (!program) {
    throw acp.RequestError.invalidParams(
      { command },
      "command not found on the agent's PATH",
    );
  }
  const args = params.args ?? [];
  const line = (name: string) =>
    [
      ...env.map((entry) => `${entry.name}=${entry.value}`),
      name,
      ...args,
    ].join(" ");
  const bare = basename(command);
  const alias = command.includes("/") &&
      sameFile(program, findOnPath(bare, agentPath))
    ? line(bare)
    : undefined;
  const layers = commandLayers({ command, program, args, env, agentPath, cwd });
  return {
    command,
    program,
    args,
    env,
    title: line(command),
    alias,
    layers,
  };
}

function sameFile(a: string, b: string | undefined): boolean {
  if (b === undefined) return false;
  try {
    return Deno.realPathSync(a) === Deno.realPathSync(b);
  } catch {
    return false;
  }
}
