/**
 * Opens a run store: the embedded SQLite file under a data directory (or a
 * fleet's shared PostgreSQL database), and the default data directory for
 * this machine.
 *
 * @module
 */

import { join } from "node:path";
import { RunnerError } from "../errors.ts";
import { openSqliteStore } from "./sqlite.ts";
import { asyncRunStore } from "./sync_adapter.ts";
import type { OpenStoreOptions, RunStore } from "./types.ts";

/** The store file's name inside the data directory. */
export const STORE_FILE_NAME = "runner.db";

/**
 * Opens (creating and migrating if needed) the SQLite store in
 * `options.dataDir`, or the shared PostgreSQL store of `options.shared`.
 *
 * @throws {RunnerError} `store.unavailable` when the directory or file (or
 * the database) cannot be created or opened; `store.schema_too_new` when a
 * newer runner wrote it.
 */
export function openStore(options: OpenStoreOptions): Promise<RunStore> {
  if (options.shared) {
    const shared = options.shared;
    // Loaded only for a fleet: the embedded store never needs the driver.
    return import("./postgres.ts").then(({ openPostgresStore }) =>
      openPostgresStore({ ...shared, onFlushError: options.onFlushError })
    );
  }
  try {
    return Promise.resolve(asyncRunStore(openSqliteStore({
      ...options,
      path: join(options.dataDir, STORE_FILE_NAME),
    })));
  } catch (error) {
    return Promise.reject(error);
  }
}

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
