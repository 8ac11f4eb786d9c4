/**
 * The runner's data directory on this machine (the store, agent records),
 * without loading the store itself.
 *
 * @module
 */

import { join } from "node:path";
import { RunnerError } from "../errors.ts";

/** Options for {@linkcode defaultDataDir}; tests pass their own environment. */
export interface DefaultDataDirOptions {
  /** Reads an environment variable (defaults to `Deno.env.get`). */
  env?: (name: string) => string | undefined;
  /** The operating system (defaults to `Deno.build.os`). */
  os?: typeof Deno.build.os;
}

/**
 * The default data directory: `$RUNNER_DATA_DIR`, else
 * `$XDG_DATA_HOME/runner`, else `~/.local/share/runner`
 * (`~/Library/Application Support/runner` on macOS,
 * `%LOCALAPPDATA%\runner` on Windows).
 *
 * @throws {RunnerError} `config.invalid` when no home directory is known.
 */
export function defaultDataDir(options: DefaultDataDirOptions = {}): string {
  const env = options.env ?? ((name: string) => Deno.env.get(name));
  const os = options.os ?? Deno.build.os;
  const read = (name: string) => {
    const value = env(name)?.trim();
    return value ? value : undefined;
  };
  const explicit = read("RUNNER_DATA_DIR");
  if (explicit) return explicit;
  const xdg = read("XDG_DATA_HOME");
  if (xdg) return join(xdg, "runner");
  if (os === "windows") {
    const appData = read("LOCALAPPDATA") ?? read("APPDATA");
    if (appData) return join(appData, "runner");
  }
  const home = read("HOME") ?? read("USERPROFILE");
  if (!home) {
    throw new RunnerError(
      "config.invalid",
      "No home directory is known, so the runner cannot choose a data directory; set RUNNER_DATA_DIR.",
    );
  }
  if (os === "darwin") {
    return join(home, "Library", "Application Support", "runner");
  }
  return join(home, ".local", "share", "runner");
}
