/**
 * `location=daemon` (`lib/locations/daemon.ts`) through the shared location
 * cases (`location_suite.ts`): a real hub on 127.0.0.1 and a real `runner
 * daemon` subprocess dialling it through a tap that checks every frame
 * against the relay contract; each turn is a hub job there.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { createHub, serveHub } from "../../lib/hub/relay_hub.ts";
import { createDaemonLocation } from "../../lib/locations/daemon.ts";
import { DAEMON_TOKEN, daemonProcess } from "../daemon_test_helpers.ts";
import { tempDir } from "../helpers.ts";
import { locationSuite, openManager } from "./location_suite.ts";

locationSuite({
  name: "daemon",
  async open() {
    const hub = createHub({
      token: DAEMON_TOKEN,
      stateDir: join(tempDir(), "relay"),
    });
    const server = serveHub({ hub });
    const tokenFile = join(tempDir(), "token");
    Deno.writeTextFileSync(tokenFile, DAEMON_TOKEN + "\n");
    const daemon = daemonProcess(server.url, "suite", tokenFile);
    await daemon.connected;
    return openManager({
      config: { location: "daemon", "daemon-id": "suite" },
      daemon: createDaemonLocation({ hub }),
      async after() {
        assert.equal(await daemon.stop(), 0, daemon.logs());
        await hub.close();
        await server.close();
      },
    });
  },
});
