/**
 * `location=remote-ssh` (`lib/locations/remote_ssh.ts`) through the shared
 * location cases (`location_suite.ts`): the agent runs over a real sshd on
 * 127.0.0.1.
 */

import { SSHD_PATH, sshTargetConfig, startSshd } from "../ssh_helpers.ts";
import { locationSuite, openManager } from "./location_suite.ts";

locationSuite({
  name: "remote-ssh",
  ignore: !SSHD_PATH,
  async open() {
    const sshd = await startSshd();
    return openManager({ config: sshTargetConfig(sshd), after: sshd.close });
  },
});
