/**
 * kill -9 of a real `runner serve` replica on PostgreSQL (`--store`) at a
 * random moment of an SSE stream, then the same replica restarted: nothing
 * the client saw is lost, the restart's `runner.replica_lost` comes after it
 * (see `serve_crash_helpers.ts`).
 *
 * @module
 */

import assert from "node:assert/strict";
import { freePort, startReplicaAt } from "../fleet_helpers.ts";
import { clusterForThisFile } from "../pg_helpers.ts";
import { crashTries } from "../serve_crash_helpers.ts";
import { tempDir } from "../serve_test_helpers.ts";

const cluster = clusterForThisFile();

Deno.test({
  name:
    "[postgres] kill -9 of a replica at a random moment of a stream: the client's events survive, the restart's terminal event comes after them, a resume ends with it",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const dir = await tempDir();
    const urls: string[] = [];
    try {
      const interrupted = await crashTries({
        dir,
        tries: 4,
        async start(dataDir, index) {
          urls[index] ??= await cluster().newDatabase();
          return await startReplicaAt(urls[index], {
            replicaId: "a",
            port: freePort(),
            dataDir,
          });
        },
      });
      assert.ok(interrupted > 0, "no kill interrupted a run");
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
