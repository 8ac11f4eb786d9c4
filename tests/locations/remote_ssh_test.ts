/**
 * `location=remote-ssh` (`lib/locations/remote_ssh.ts`) through the shared
 * location cases (`location_suite.ts`): the agent runs over a real sshd on
 * 127.0.0.1.
 */

import { join } from "node:path";
import { createReaperRegistry } from "../../lib/agent/reaper.ts";
import { RunnerError } from "../../lib/errors.ts";
import { runnerLocations } from "../../lib/locations/runner_locations.ts";
import { createRunManager } from "../../lib/run/manager.ts";
import { openStoreNow, tempDir } from "../helpers.ts";
import { SSHD_PATH, sshTargetConfig, startSshd } from "../ssh_helpers.ts";
import { locationSuite } from "./location_suite.ts";

locationSuite({
  name: "remote-ssh",
  ignore: !SSHD_PATH,
  async open() {
    const sshd = await startSshd();
    const dataDir = tempDir();
    const store = openStoreNow(dataDir);
    const manager = createRunManager({
      store,
      locations: runnerLocations(),
      registry: createReaperRegistry(join(dataDir, "agents")),
    });
    return {
      manager,
      config: sshTargetConfig(sshd),
      async close() {
        await manager.shutdown(
          new RunnerError("runner.shutting_down", "The test ended."),
        );
        await store.close();
        await sshd.close();
      },
    };
  },
});
