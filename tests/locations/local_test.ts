/**
 * `location=local` (`lib/locations/local.ts`) through the shared location
 * cases (`location_suite.ts`): the agent runs on this machine.
 */

import { join } from "node:path";
import { createReaperRegistry } from "../../lib/agent/reaper.ts";
import { RunnerError } from "../../lib/errors.ts";
import { runnerLocations } from "../../lib/locations/runner_locations.ts";
import { createRunManager } from "../../lib/run/manager.ts";
import { openStoreNow, tempDir } from "../helpers.ts";
import { locationSuite } from "./location_suite.ts";

locationSuite({
  name: "local",
  open() {
    const dataDir = tempDir();
    const store = openStoreNow(dataDir);
    const manager = createRunManager({
      store,
      locations: runnerLocations(),
      registry: createReaperRegistry(join(dataDir, "agents")),
    });
    return Promise.resolve({
      manager,
      config: {},
      async close() {
        await manager.shutdown(
          new RunnerError("runner.shutting_down", "The test ended."),
        );
        await store.close();
      },
    });
  },
});
