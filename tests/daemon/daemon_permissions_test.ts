/**
 * Interactive approvals across coding-relay-v1: with our hub and our
 * `runner daemon` both announcing `permission.ask`, a person's answer posted
 * to `runner serve` reaches the agent on the daemon; with a daemon that does
 * not announce it (like LangBot's `daemon.py`), the hub sends the fallback
 * and says so in a `permission.unavailable` event.
 *
 * @module
 */

import assert from "node:assert/strict";
import { runDaemonClient } from "../../lib/daemon/client.ts";
import type { RunEvent } from "../../lib/events.ts";
import type { JsonObject } from "../../lib/relay.ts";
import {
  DAEMON_TOKEN,
  serveWithDaemon,
  serveWithHub,
} from "../daemon_test_helpers.ts";
import { fixtureCommand, tempDir } from "../helpers.ts";
import {
  assertStatus,
  deltaText,
  postJson,
  sseEvents,
  type SseMessage,
  streamUntil,
} from "../serve_test_helpers.ts";

function daemonRunConfig(daemonId: string, extra: Record<string, unknown>) {
  return {
    provider: "custom",
    location: "daemon",
    "daemon-id": daemonId,
    workspace: tempDir(),
    "acp-command": fixtureCommand("--permission"),
    "permission-decision": "ask",
    ...extra,
  };
}

/** A daemon run waiting for a person's decision. */
interface AskedRun {
  /** The run's events up to its `permission.requested`. */
  events: RunEvent[];
  /** The rest of the run's stream. */
  messages: AsyncGenerator<SseMessage>;
  /** Where the answer to the request goes. */
  answerUrl: string;
}

/**
 * Starts `runner serve` with `runner daemon` `daemonId`, posts a run on it
 * that asks for permission (with `extra` config), hands `fn` the run once the
 * request streamed, and stops both after.
 */
async function withAskOnDaemon(
  daemonId: string,
  extra: Record<string, unknown>,
  fn: (asked: AskedRun) => Promise<void>,
): Promise<void> {
  const { serve, daemon } = await serveWithDaemon(daemonId);
  try {
    await daemon.connected;
    const response = await postJson(`${serve.url}/v1/runs`, {
      input: { text: "write the file" },
      config: daemonRunConfig(daemonId, extra),
    });
    const { events, messages } = await streamUntil(
      response,
      "permission.requested",
    );
    const requested = events.at(-1)!;
    await fn({
      events,
      messages,
      answerUrl:
        `${serve.url}/v1/runs/${requested.run_id}/permissions/${requested.data.request_id}`,
    });
  } finally {
    await daemon.stop();
    await serve.stop("SIGTERM");
  }
}

Deno.test("ask through runner daemon: the request streams from serve, the answer reaches the agent on the daemon", async () => {
  await withAskOnDaemon(
    "approver",
    {},
    async ({ events, messages, answerUrl: url }) => {
      const notOffered = await postJson(url, { option_id: "sudo" });
      await assertStatus(notOffered, 400);
      const answered = await postJson(url, { decision: "reject_once" });
      await assertStatus(answered, 200);
      const again = await postJson(url, { decision: "allow_once" });
      await assertStatus(again, 409);
      for await (const message of messages) {
        events.push(
          JSON.parse(message.data),
        );
      }
      const decided = events.filter((e) => e.type === "permission.decided");
      assert.deepEqual(
        decided.map((e) => [e.data.decision, e.data.by]),
        [["reject_once", "caller"]],
      );
      assert.equal(
        deltaText(events),
        "permission: reject_once\necho: write the file (turn 1)",
      );
      assert.equal(events.at(-1)?.type, "run.completed");
    },
  );
});

Deno.test("through runner daemon: a person's reject, then a turn without text, reaches serve as run.permission_rejected, not retryable", async () => {
  const silent = {
    "acp-command": fixtureCommand("--permission", "--silent-on-reject"),
  };
  await withAskOnDaemon("refuser", silent, async (asked) => {
    const { events, messages } = asked;
    const answered = await postJson(asked.answerUrl, {
      decision: "reject_once",
    });
    await assertStatus(answered, 200);
    for await (const message of messages) events.push(JSON.parse(message.data));
    const failed = events.filter((e) => e.type === "run.failed");
    assert.equal(failed.length, 1);
    assert.equal(events.at(-1), failed[0]);
    assert.equal(failed[0].data.code, "run.permission_rejected");
    assert.equal(failed[0].data.retryable, false);
    assert.match(
      failed[0].data.error as string,
      /"Write file" was refused \(reject_once\)/,
    );
  });
});

Deno.test("ask with a daemon that lacks permission.ask: the hub sends the fallback and says so", async () => {
  const { serve, hubUrl } = await serveWithHub();
  const controller = new AbortController();
  const payloads: JsonObject[] = [];
  const connected = Promise.withResolvers<void>();
  const client = runDaemonClient({
    url: hubUrl,
    daemonId: "python-like",
    token: DAEMON_TOKEN,
    // Like daemon.py: no capabilities in the hello.
    metadata: { capabilities: null },
    signal: controller.signal,
    onLog: (entry) => {
      if (entry.message.startsWith("connected to the hub")) connected.resolve();
    },
    runJob: (job) => {
      payloads.push(job.payload);
      job.emit({
        type: "run.completed",
        data: {
          finish_reason: "stop",
          message: { role: "assistant", content: "ok" },
        },
      });
      return Promise.resolve({ cleanupConfirmed: true });
    },
  });
  try {
    await connected.promise;
    const response = await postJson(`${serve.url}/v1/runs`, {
      input: { text: "write the file" },
      config: daemonRunConfig("python-like", {
        "permission-fallback": "reject_always",
      }),
    });
    const events = await sseEvents(response);
    assert.equal(events[0].type, "permission.unavailable");
    assert.equal(events[0].data.fallback, "reject_always");
    assert.match(
      String(events[0].data.reason),
      /daemon python-like cannot ask/,
    );
    assert.equal(events.at(-1)?.type, "run.completed");
    const config = payloads[0].config as JsonObject;
    assert.equal(config.permission_decision, "reject_always");
  } finally {
    controller.abort();
    await client;
    await serve.stop("SIGTERM");
  }
});
