/**
 * Opens a run store: the embedded SQLite file under a data directory (or a
 * fleet's shared PostgreSQL database). The default data directory is in
 * `data_dir.ts` (commands that only need the directory do not load the store).
 *
 * @module
 */

import { join } from "node:path";
import { prefetchOwnStartTime } from "./owner_liveness.ts";
import { openSqliteStore } from "./sqlite/store.ts";
import { asyncRunStore } from "./sqlite/sync_adapter.ts";
import type { OpenStoreOptions, RunStore } from "./types.ts";

export { defaultDataDir, type DefaultDataDirOptions } from "./data_dir.ts";

/** The store file's name inside the data directory. */
export const STORE_FILE_NAME = "runner.db";

/**
 * Opens (creating and migrating if needed) the SQLite store in
 * `options.dataDir`, or the shared PostgreSQL store of `options.shared`.
 *
 * @throws {RunnerError} `store.unavailable` when the directory or file (or
 * the database) cannot be created or opened; `store.schema_too_new` when a
 * newer runner wrote it.
 *
 * @example Open the embedded store in a data directory and read it
 * ```ts
 * import assert from "node:assert/strict";
 * import { openStore } from "./open.ts";
 *
 * const dataDir = await Deno.makeTempDir();
 * const store = await openStore({ dataDir });
 * try {
 *   // A fresh store holds no runs; `runner serve` and `runner run` write them.
 *   assert.deepEqual(await store.listRuns({ limit: 10 }), []);
 *   assert.equal((await store.health()).ok, true);
 * } finally {
 *   await store.close();
 *   await Deno.remove(dataDir, { recursive: true });
 * }
 * ```
 */
export async function openStore(options: OpenStoreOptions): Promise<RunStore> {
  // Run records carry the owner's start time; read it while the store opens.
  const ownerKnown = prefetchOwnStartTime();
  if (options.shared) {
    // Loaded only for a fleet: the embedded store never needs the driver.
    const { openPostgresStore } = await import("./postgres/store.ts");
    const store = await openPostgresStore({
      ...options.shared,
      onFlushError: options.onFlushError,
    });
    await ownerKnown;
    return store;
  }
  const store = asyncRunStore(openSqliteStore({
    ...options,
    path: join(options.dataDir, STORE_FILE_NAME),
  }));
  await ownerKnown;
  return store;
}
