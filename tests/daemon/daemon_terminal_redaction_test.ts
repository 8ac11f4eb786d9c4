/**
 * Redaction where terminal events are made, on the daemon path: a daemon's
 * events reach the hub's callers as the daemon made them, with no recorder
 * redacting again on the way (`runner serve`'s hub does, LangBot's does
 * not), so a secret in a command line, its cwd or its output must already be
 * gone from the `terminal.*` events the daemon sends: the test reads the
 * frames on the wire, not only what the hub's callers get.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import type { RunEvent } from "../../lib/events.ts";
import { agentCommand, tempDir } from "../helpers.ts";
import { postDaemonRun, serveWithDaemon } from "../daemon_test_helpers.ts";
import { sseEvents } from "../serve_test_helpers.ts";

const SECRET = "sk-daemon-terminal-Qz7Wv3Np8Lk2";
const API_TOKEN = "daemon-redaction-api-token-Hs4Jd8Kq1";

Deno.test("runner daemon: a secret in a terminal's command line, cwd and output never leaves the daemon", async () => {
  const { serve, daemon } = await serveWithDaemon("terminal-redaction", {
    serveArgs: [
      "--client-terminals",
      "true",
      "--api-token",
      API_TOKEN,
      "--allow-env-names",
      "SERVICE_API_KEY",
    ],
    daemonArgs: ["--client-terminals", "true"],
  });
  try {
    await daemon.connected;
    const workspace = tempDir();
    Deno.mkdirSync(join(workspace, SECRET));
    const response = await postDaemonRun(serve.url, {
      daemonId: "terminal-redaction",
      config: {
        workspace,
        "client-terminals": true,
        "env-json": { SERVICE_API_KEY: SECRET },
        "acp-command": agentCommand([
          "--terminal",
          JSON.stringify({
            command: "echo",
            args: [SECRET, `prefix-${SECRET}`],
            cwd: SECRET,
          }),
        ]),
      },
    }, { authorization: `Bearer ${API_TOKEN}` });
    assert.equal(response.status, 200);
    const events: RunEvent[] = await sseEvents(response);
    assert.equal(events.at(-1)!.type, "run.completed");
    const [started] = events.filter((e) => e.type === "terminal.started");
    assert.ok(started, "the command ran");
    assert.deepEqual(started.data.args, ["[REDACTED]", "prefix-[REDACTED]"]);
    assert.equal(started.data.cwd, "[REDACTED]");
    const output = events.filter((e) => e.type === "terminal.output")
      .map((e) => e.data.output).join("");
    assert.equal(output, "[REDACTED] prefix-[REDACTED]\n");
    for (const event of events) {
      assert.ok(!JSON.stringify(event).includes(SECRET), event.type);
    }
    // What the daemon sent: runner serve's hub redacts again, another hub
    // (LangBot's) does not.
    const sent = daemon.tap.fromDaemon.filter((frame) =>
      frame.includes("terminal.")
    );
    assert.ok(sent.length >= 3, "terminal events crossed the wire");
    for (const frame of daemon.tap.fromDaemon) {
      assert.ok(!frame.includes(SECRET), frame);
    }
  } finally {
    assert.equal(await daemon.stop(), 0, "every frame fit the contract");
    await serve.stop();
  }
});
