/**
 * A daemon's events reach the hub's callers as the daemon made them: a hub
 * other than `runner serve` (LangBot's) does not redact again. An agent that
 * knows a secret can put it anywhere in its updates (a tool call's input and
 * output, its title, a plan, an update of a kind the runner does not know):
 * no frame the daemon sends may carry it.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { RunEvent } from "../../lib/events.ts";
import { agentCommand, tempDir } from "../helpers.ts";
import { postDaemonRun, serveWithDaemon } from "../daemon_test_helpers.ts";
import { sseEvents } from "../serve_test_helpers.ts";

const SECRET = "sk-daemon-wire-Rt5Yu8Io2Pa4";
const API_TOKEN = "daemon-wire-api-token-Gh6Jk9Lm3";
const UPDATES = [
  {
    sessionUpdate: "tool_call",
    toolCallId: "t1",
    title: `Read ${SECRET}`,
    kind: "read",
    status: "pending",
    rawInput: { path: SECRET, [SECRET]: "key" },
  },
  {
    sessionUpdate: "tool_call_update",
    toolCallId: "t1",
    status: "completed",
    rawOutput: { text: `out ${SECRET}` },
  },
  {
    sessionUpdate: "plan",
    entries: [{
      content: `step ${SECRET}`,
      priority: "high",
      status: "pending",
    }],
  },
  { sessionUpdate: "mystery_update", value: SECRET },
];

Deno.test("runner daemon: a secret anywhere in the agent's updates never leaves the daemon", async () => {
  const { serve, daemon } = await serveWithDaemon("wire-redaction", {
    serveArgs: [
      ...["--api-token", API_TOKEN],
      ...["--allow-env-names", "SERVICE_API_KEY"],
    ],
  });
  try {
    await daemon.connected;
    const response = await postDaemonRun(serve.url, {
      daemonId: "wire-redaction",
      config: {
        workspace: tempDir(),
        "env-json": { SERVICE_API_KEY: SECRET },
        "acp-command": agentCommand([
          "--script",
          JSON.stringify([
            ["text", "done"],
            ...UPDATES.map((update) => ["update", JSON.stringify(update)]),
          ]),
        ]),
      },
    }, { authorization: `Bearer ${API_TOKEN}` });
    assert.equal(response.status, 200);
    const events: RunEvent[] = await sseEvents(response);
    assert.equal(events.at(-1)!.type, "run.completed");
    assert.ok(
      events.some((event) => event.type === "tool.call.started"),
      "the tool call crossed",
    );
    for (const event of events) {
      assert.ok(!JSON.stringify(event).includes(SECRET), event.type);
    }
    assert.ok(daemon.tap.fromDaemon.length > 3, "frames crossed the wire");
    for (const frame of daemon.tap.fromDaemon) {
      assert.ok(!frame.includes(SECRET), frame);
    }
  } finally {
    assert.equal(await daemon.stop(), 0, "every frame fit the contract");
    await serve.stop();
  }
});
