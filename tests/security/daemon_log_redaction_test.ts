/**
 * A daemon's log is read by the daemon's operator, who is not the caller
 * that handed the job its env-json. An agent that knows a secret from that
 * env-json can put it in what the run logs (its stop reason): the daemon's
 * log must not show it.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { RunEvent } from "../../lib/events.ts";
import { agentCommand, tempDir } from "../helpers.ts";
import { postDaemonRun, serveWithDaemon } from "../daemon_test_helpers.ts";
import { sseEvents } from "../serve_test_helpers.ts";

const SECRET = "sk-daemon-log-Wq3Er6Ty9Ui1";
const API_TOKEN = "daemon-log-api-token-Zx4Cv7Bn0";

Deno.test("runner daemon: a secret from a job's env-json does not show in the daemon's log", async () => {
  const { serve, daemon } = await serveWithDaemon("log-redaction", {
    serveArgs: [
      ...["--api-token", API_TOKEN],
      ...["--allow-env-names", "SERVICE_API_KEY"],
    ],
    daemonArgs: ["--log-level", "debug"],
  });
  try {
    await daemon.connected;
    const response = await postDaemonRun(serve.url, {
      daemonId: "log-redaction",
      config: {
        workspace: tempDir(),
        "env-json": { SERVICE_API_KEY: SECRET },
        "acp-command": agentCommand(["--stop-reason", `stop ${SECRET}`]),
      },
    }, { authorization: `Bearer ${API_TOKEN}` });
    assert.equal(response.status, 200);
    const events: RunEvent[] = await sseEvents(response);
    assert.ok(events.at(-1), "the run ended");
  } finally {
    assert.equal(await daemon.stop(), 0, "every frame fit the contract");
    await serve.stop();
  }
  const logs = daemon.logs();
  assert.ok(logs.includes("stop [REDACTED]"), "the stop reason was logged");
  assert.ok(!logs.includes(SECRET), "the secret is in the daemon's log");
});
