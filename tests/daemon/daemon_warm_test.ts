/**
 * The daemon keeps its own warm pool: through a real `runner serve` hub and a
 * real `runner daemon`, the second message of a conversation reuses the
 * daemon's agent (only `session/prompt`), its MCP proxy answers with the
 * current run's assets, the session id stays the conversation's, and the
 * daemon's SIGTERM leaves no agent behind.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import {
  assertAgentGone,
  fixtureCommand,
  isAlive,
  tempDir,
} from "../helpers.ts";
import {
  daemonProcess,
  daemonTokenFile,
  serveWithHub,
} from "../daemon_test_helpers.ts";
import { apiFetch } from "../serve_test_helpers.ts";
import { currentEventCallFlags } from "../assets_test_helpers.ts";
import {
  answers,
  listAgents,
  recordByProcess,
  sendMessage,
} from "../warm_helpers.ts";
import { readRecord } from "../helpers.ts";

/** A `runner daemon` dialling `url` with this file's token. */
function startDaemon(url: string, daemonId: string, args: string[] = []) {
  return daemonProcess(url, daemonId, daemonTokenFile(), { args });
}

Deno.test("the daemon keeps its own warm agent: the next message of the conversation is only a prompt there, with that run's assets", async () => {
  const { serve, hubUrl } = await serveWithHub();
  const daemon = startDaemon(hubUrl, "desk");
  let stopped = false;
  try {
    await daemon.connected;
    const record = join(tempDir(), "record.jsonl");
    const pidFile = join(tempDir(), "pids.json");
    const config = {
      provider: "custom",
      location: "daemon",
      "daemon-id": "desk",
      workspace: tempDir(),
      "acp-command": fixtureCommand(
        ...currentEventCallFlags(record),
        "--grandchild",
        "--pid-file",
        pidFile,
      ),
    };
    const send = (text: string) =>
      sendMessage(serve, { conversation_id: "desk-chat", text, config });

    const first = await send("first message");
    assert.equal(first.agent, "cold");
    const sessionId = first.events.find((event) =>
      event.type === "state.updated"
    )?.data.value;
    assert.ok(sessionId, "the first job reports its new session");

    const second = await send("second message");
    assert.equal(second.agent, "warm");
    assert.match(answers(second)[0], /^echo: second message \(turn 2\)/);
    const processes = recordByProcess(record);
    assert.equal(processes.length, 1, "the daemon started one agent");
    assert.deepEqual(processes[0].methods, [
      "initialize",
      "session/new",
      "session/prompt",
      "session/prompt",
    ]);
    const calls = readRecord(record).filter((line) =>
      line.event === "mcp" && line.method === "tools/call"
    ).map((line) => JSON.stringify(line.body));
    assert.ok(calls[0].includes("first message"), calls[0]);
    assert.ok(calls[1].includes("second message"), calls[1]);

    const conversation =
      await (await apiFetch(`${serve.url}/v1/conversations/desk-chat`)).json();
    assert.equal(conversation.sessions[0].session_id, sessionId);
    // The pool is the daemon's own; the hub keeps none for daemon runs.
    assert.deepEqual(await listAgents(serve), []);

    assert.ok(isAlive(processes[0].pid), "the warm agent idles on the daemon");
    assert.equal(await daemon.stop(), 0);
    stopped = true;
    // Its TERM-ignoring grandchild too: the warm agent's group was torn down.
    assertAgentGone(pidFile);
  } finally {
    if (!stopped) await daemon.stop();
    await serve.stop("SIGTERM");
  }
});

Deno.test("the daemon's warm key: each part of the target alone (env-json value, command, workspace, fs, assets, conversation) starts a new agent; the prompt and timeout do not", async () => {
  const { serve, hubUrl } = await serveWithHub({
    serveArgs: [
      "--allow-custom-commands",
      "--allow-env-names",
      "PROVIDER_API_KEY",
      // fs-write is the operator's to allow, on the hub and on the daemon.
      ...["--fs-write", "true"],
    ],
  });
  const daemon = startDaemon(hubUrl, "keys", ["--fs-write", "true"]);
  try {
    await daemon.connected;
    const record = join(tempDir(), "record.jsonl");
    let config: Record<string, unknown> = {
      provider: "custom",
      location: "daemon",
      "daemon-id": "keys",
      workspace: tempDir(),
      "env-json": { PROVIDER_API_KEY: "key-1" },
      "langbot-assets-enabled": false,
      "fs-write": false,
      "acp-command": fixtureCommand("--record", record),
    };
    let conversation = "keys-chat";
    let turn = 0;
    const send = async () =>
      (await sendMessage(serve, {
        conversation_id: conversation,
        text: `message ${++turn}`,
        config,
      })).agent;
    assert.equal(await send(), "cold");
    assert.equal(await send(), "warm", "the same target");
    config = { ...config, timeout: 123 };
    assert.equal(await send(), "warm", "timeout is not part of the target");
    const changes: Array<[string, () => void]> = [
      ["a rotated env-json value", () => {
        config = { ...config, "env-json": { PROVIDER_API_KEY: "key-2" } };
      }],
      ["the command", () => {
        config = {
          ...config,
          "acp-command": fixtureCommand("--record", record, "--load-session"),
        };
      }],
      ["the workspace", () => {
        config = { ...config, workspace: tempDir() };
      }],
      ["fs-write", () => {
        config = { ...config, "fs-write": true };
      }],
      ["langbot-assets-enabled", () => {
        config = { ...config, "langbot-assets-enabled": true };
      }],
      ["the conversation", () => {
        conversation = "keys-other-chat";
      }],
    ];
    for (const [part, change] of changes) {
      change();
      assert.equal(await send(), "cold", `${part}: the old agent was reused`);
      assert.equal(await send(), "warm", `${part}: not stable`);
    }
    assert.equal(recordByProcess(record).length, changes.length + 1);
  } finally {
    await daemon.stop();
    await serve.stop("SIGTERM");
  }
});
