/**
 * What starting one agent needs: argv, environment (allow-list plus
 * env-json), working directory and the secrets to redact. `lib/providers.ts`
 * makes one from a run config (`prepareAgentCommand`).
 *
 * @module
 */

import type { SandboxPlan } from "./sandbox.ts";

/** Where a resolved command came from. */
export type CommandSource =
  | "configured"
  | "executable"
  | "fallback"
  | "registry";

/** What starting one agent needs. */
export interface AgentCommand {
  /** Program and arguments. */
  argv: string[];
  /** The command that runs: as configured, or the preset's executable or fallback. */
  commandText: string;
  /** Where the command came from: `acp-command`, the preset agent's own executable (found on the agent's PATH), or its pinned fallback. */
  commandSource?: CommandSource;
  /** A preset's executable and fallback, for a machine that chooses by its own PATH (ssh). */
  choices?: { executable: string[]; fallback: string[] };
  /** Names the agent whichever command runs (for session keys). */
  sessionCommand?: string;
  /** The agent's whole environment. */
  env: Record<string, string>;
  /** The agent's working directory. */
  cwd: string;
  /** Values to redact from anything reported. */
  secrets: string[];
  /** A registry agent installed on this machine: what a confined run may read. */
  installDir?: string;
  /** How the agent is confined (`sandbox=confined` on this machine); `argv` then starts bwrap. */
  sandbox?: SandboxPlan;
}
