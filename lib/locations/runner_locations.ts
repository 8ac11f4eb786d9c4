/**
 * The locations an entry point hands the run manager: local and remote-ssh
 * always, daemon when the runner serves a hub (`createDaemonLocation`).
 *
 * @module
 */

import type { AgentLocation, RunLocations } from "../run/location.ts";
import { createLocalLocation } from "./local.ts";
import { createSshLocation } from "./remote_ssh.ts";

/** Every location this runner offers; `daemon` only when given. */
export function runnerLocations(daemon?: AgentLocation): RunLocations {
  return {
    local: createLocalLocation(),
    "remote-ssh": createSshLocation(),
    ...(daemon ? { daemon } : {}),
  };
}
