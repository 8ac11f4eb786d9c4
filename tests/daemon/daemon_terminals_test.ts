/**
 * Client terminals through a real `runner daemon` behind `runner serve`'s
 * hub: `client-terminals` and the permission rules travel in `run.start`,
 * the daemon runs the commands on its machine, `terminal.*` events and the
 * tool events' `terminal_ids` reach the hub's callers, every frame on the
 * wire fits LangBot's model (the relay tap checks them; `terminal_ids` ride
 * in the runner details), and a command left running is gone by the time
 * `run.completed` arrives.
 *
 * @module
 */

import assert from "node:assert/strict";
import { processGroupMembers } from "../../lib/agent/process_table.ts";
import type { RunEvent } from "../../lib/events.ts";
import { agentCommand, tempDir } from "../helpers.ts";
import { postDaemonRun, serveWithDaemon } from "../daemon_test_helpers.ts";
import { postJson, sseEvents } from "../serve_test_helpers.ts";

const PRINT_GROUP = "read -r _ _ _ _ group _ < /proc/self/stat; echo $group";

Deno.test("runner daemon: terminals run on the daemon's machine under the run's rules, their events reach the hub's callers, and they die with the run", async () => {
  const { serve, daemon } = await serveWithDaemon("terminals-1", {
    serveArgs: ["--client-terminals", "true"],
    daemonArgs: ["--client-terminals", "true"],
  });
  try {
    await daemon.connected;
    const response = await postDaemonRun(serve.url, {
      daemonId: "terminals-1",
      config: {
        workspace: tempDir(),
        "client-terminals": true,
        "permission-rules-json": [
          { kind: "execute", title: "touch *", decision: "reject" },
        ],
        "acp-command": agentCommand([
          "--terminal",
          JSON.stringify({ command: "touch", args: ["x"] }),
          "--terminal",
          JSON.stringify({ command: "echo", args: ["from", "the", "daemon"] }),
          "--terminal",
          JSON.stringify({
            command: "sh",
            // Its process group as the host sees it (`$$` is small in a
            // PID namespace).
            args: ["-c", `${PRINT_GROUP}; sleep 1000`],
            wait: false,
          }),
        ]),
      },
    });
    const events: RunEvent[] = await sseEvents(response);
    assert.equal(events.at(-1)!.type, "run.completed");
    const decided = events.filter((e) => e.type === "permission.decided");
    assert.deepEqual(
      decided.map((e) => [e.data.title, e.data.decision, e.data.rule]),
      [
        ["touch x", "reject_once", 0],
        ["echo from the daemon", "allow_once", "default"],
        [`sh -c ${PRINT_GROUP}; sleep 1000`, "allow_once", "default"],
      ],
    );
    const started = events.filter((e) => e.type === "terminal.started");
    assert.deepEqual(started.map((e) => e.data.command), ["echo", "sh"]);
    const output = events.filter((e) => e.type === "terminal.output")
      .map((e) => e.data.output).join("");
    assert.match(output, /^from the daemon\n\d+\n$/);
    const pid = Number(output.split("\n")[1]);
    assert.deepEqual(await processGroupMembers(pid), [], "gone by now");
    const tools = events.filter((e) => e.type === "tool.call.started");
    assert.deepEqual(
      tools.map((e) => e.data.terminal_ids),
      started.map((e) => [e.data.terminal_id]),
      "terminal_ids come back from the runner details",
    );
    const completed = events.find((e) => e.type === "message.completed")!;
    const text = String(
      (completed.data.message as { content: string }).content,
    );
    assert.match(text, /^terminal 0: .*permission policy rejected/m);
    assert.match(text, /^terminal 1: .*"output":"from the daemon\\n"/m);
  } finally {
    assert.equal(await daemon.stop(), 0, "every frame fit the contract");
    await serve.stop();
  }
});

Deno.test("runner daemon: its own client-terminals=false and terminal-timeout hold against the hub's run.start", async () => {
  const { serve, daemon } = await serveWithDaemon("terminals-2", {
    serveArgs: ["--client-terminals", "true"],
    daemonArgs: ["--client-terminals", "true", "--terminal-timeout", "1"],
  });
  const off = await serveWithDaemon("terminals-3", {
    serveArgs: ["--client-terminals", "true"],
  });
  try {
    await daemon.connected;
    await off.daemon.connected;
    const config = (daemonId: string, script: string) => ({
      provider: "custom",
      location: "daemon",
      "daemon-id": daemonId,
      workspace: tempDir(),
      "client-terminals": true,
      "terminal-timeout": 500,
      "acp-command": agentCommand([
        "--terminal",
        JSON.stringify({ command: "sh", args: ["-c", script] }),
      ]),
    });
    const refused: RunEvent[] = await sseEvents(
      await postJson(`${off.serve.url}/v1/runs`, {
        input: { text: "terminals off here" },
        config: config("terminals-3", "echo ran"),
      }),
    );
    assert.equal(refused.at(-1)!.type, "run.completed");
    assert.ok(!refused.some((e) => e.type === "terminal.started"));
    const reply = refused.find((e) => e.type === "message.completed")!;
    assert.match(
      String((reply.data.message as { content: string }).content),
      /^terminal 0: .*Method not found/im,
    );
    const capped: RunEvent[] = await sseEvents(
      await postJson(`${serve.url}/v1/runs`, {
        input: { text: "the daemon's timeout" },
        config: config("terminals-2", "sleep 1000"),
      }),
    );
    assert.equal(capped.at(-1)!.type, "run.completed");
    const exited = capped.find((e) => e.type === "terminal.exited")!;
    assert.equal(exited.data.timed_out, true, "killed after the daemon's 1 s");
  } finally {
    assert.equal(await daemon.stop(), 0, "every frame fit the contract");
    assert.equal(await off.daemon.stop(), 0);
    await serve.stop();
    await off.serve.stop();
  }
});
