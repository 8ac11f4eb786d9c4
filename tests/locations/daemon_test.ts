/**
 * `location=daemon` (`lib/locations/daemon.ts`) through the shared location
 * cases (`location_suite.ts`): a real hub on 127.0.0.1 and a real `runner
 * daemon` subprocess dialling it through a tap that checks every frame
 * against the relay contract; each turn is a hub job there.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { RunnerError } from "../../lib/errors.ts";
import { createHub, serveHub } from "../../lib/hub/relay_hub.ts";
import { createDaemonLocation } from "../../lib/locations/daemon.ts";
import { runnerLocations } from "../../lib/locations/runner_locations.ts";
import { createRunManager } from "../../lib/run/manager.ts";
import { DAEMON_TOKEN, daemonProcess } from "../daemon_test_helpers.ts";
import { openStoreNow, tempDir } from "../helpers.ts";
import { locationSuite } from "./location_suite.ts";

locationSuite({
  name: "daemon",
  async open() {
    const dataDir = tempDir();
    const store = openStoreNow(dataDir);
    const hub = createHub({
      token: DAEMON_TOKEN,
      stateDir: join(dataDir, "relay"),
    });
    const server = serveHub({ hub });
    const manager = createRunManager({
      store,
      locations: runnerLocations(createDaemonLocation({ hub })),
    });
    const tokenFile = join(tempDir(), "token");
    Deno.writeTextFileSync(tokenFile, DAEMON_TOKEN + "\n");
    const daemon = daemonProcess(server.url, "suite", tokenFile);
    await daemon.connected;
    return {
      manager,
      config: { location: "daemon", "daemon-id": "suite" },
      async close() {
        await manager.shutdown(
          new RunnerError("runner.shutting_down", "The test ended."),
        );
        assert.equal(await daemon.stop(), 0, daemon.logs());
        await hub.close();
        await server.close();
        await store.close();
      },
    };
  },
});
