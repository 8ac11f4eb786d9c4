/**
 * Session config options through `runner serve` (local, warm, and a real
 * `runner daemon`): a run configured with `model` and `mode` shows them in
 * its `session.configured` event, and a value the agent does not offer fails
 * before the prompt.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import type { RunEvent } from "../../lib/events.ts";
import { serveWithDaemon } from "../daemon_test_helpers.ts";
import { fixtureCommand, readRecord, tempDir } from "../helpers.ts";
import {
  deltaText,
  postJson,
  sseEvents,
  terminals,
  withServe,
} from "../serve_test_helpers.ts";

function configured(events: RunEvent[]) {
  return events.filter((e) => e.type === "session.configured").map((e) =>
    e.data
  );
}

async function post(
  url: string,
  body: Record<string, unknown>,
): Promise<RunEvent[]> {
  const response = await postJson(`${url}/v1/runs`, body);
  assert.equal(response.status, 200);
  const events = await sseEvents(response);
  assert.equal(terminals(events).length, 1);
  return events;
}

Deno.test("runner serve: model and mode appear in session.configured; a warm agent that changed its mode gets the wanted one back", async () => {
  await withServe({ args: ["--allow-custom-commands"] }, async (serve, dir) => {
    const record = join(dir, "record.jsonl");
    const config = {
      provider: "custom",
      workspace: join(dir, "ws"),
      "acp-command": fixtureCommand(
        "--session-config",
        "both",
        "--switch-mode-on-prompt",
        "acceptEdits",
        "--record",
        record,
      ),
      model: "fast",
      mode: "plan",
    };
    const body = { conversation_id: "cfg-1", input: { text: "hi" }, config };
    const first = await post(serve.url, body);
    assert.equal(first.at(-1)!.type, "run.completed");
    assert.deepEqual(configured(first)[0], {
      model: "fast",
      mode: "plan",
      config: { mode: "plan", model: "fast", effort: "medium", verbose: false },
      changed: ["model", "mode"],
    });
    // The agent switched itself to acceptEdits during the turn.
    assert.match(deltaText(first), /^config: mode=acceptEdits model=fast /);
    assert.equal(configured(first).at(-1)!.mode, "acceptEdits");
    const second = await post(serve.url, body);
    assert.equal(second[0].data.agent, "warm");
    assert.deepEqual(configured(second)[0].changed, ["mode"]);
    assert.equal(configured(second)[0].mode, "plan");
    const calls = readRecord(record).filter((r) => r.method);
    assert.equal(calls.filter((c) => c.method === "initialize").length, 1);
    const sets = calls.flatMap((c, i) =>
      c.method === "session/set_config_option"
        ? [[i, (c.params as { configId: string }).configId]]
        : []
    );
    assert.deepEqual(sets.map(([, id]) => id), ["model", "mode", "mode"]);
    const lastPrompt = calls.findLastIndex((c) =>
      c.method === "session/prompt"
    );
    assert.ok((sets.at(-1)![0] as number) < lastPrompt);
  });
});

Deno.test("runner serve: a model the agent does not offer is run.failed acp.config_unavailable before any prompt", async () => {
  await withServe({ args: ["--allow-custom-commands"] }, async (serve, dir) => {
    const record = join(dir, "record.jsonl");
    const events = await post(serve.url, {
      input: { text: "hi" },
      config: {
        provider: "custom",
        workspace: join(dir, "ws"),
        "acp-command": fixtureCommand(
          "--session-config",
          "options",
          "--record",
          record,
        ),
        model: "huge",
      },
    });
    const failed = events.at(-1)!;
    assert.equal(failed.type, "run.failed");
    assert.equal(failed.data.code, "acp.config_unavailable");
    assert.equal(failed.data.retryable, false);
    assert.match(String(failed.data.error), /Valid values: smart, fast\./);
    assert.ok(!readRecord(record).some((r) => r.method === "session/prompt"));
  });
});

Deno.test("through a real runner daemon, run.start carries model, mode, session-config-json, permission-rules-json and auth-method, and the events show them", async () => {
  const { serve, daemon } = await serveWithDaemon("cfg-laptop");
  try {
    await daemon.connected;
    const events = await post(serve.url, {
      input: { text: "hi" },
      config: {
        "auth-method": "fixture-login",
        provider: "custom",
        location: "daemon",
        "daemon-id": "cfg-laptop",
        workspace: tempDir(),
        "acp-command": fixtureCommand(
          "--session-config",
          "both",
          "--auth-required",
          "--permission-calls",
          // Quoted for the shell-word split of acp-command.
          `'${JSON.stringify([{ kind: "execute", title: "Run make" }])}'`,
        ),
        model: "fast",
        mode: "plan",
        "session-config-json": { effort: "low" },
        "permission-rules-json": [{ kind: "execute", decision: "reject" }],
      },
    });
    assert.equal(
      events.at(-1)!.type,
      "run.completed",
      JSON.stringify(events.at(-1)),
    );
    assert.deepEqual(configured(events)[0], {
      model: "fast",
      mode: "plan",
      config: { mode: "plan", model: "fast", effort: "low", verbose: false },
      changed: ["model", "mode", "effort"],
    });
    assert.match(deltaText(events), /^config: mode=plan model=fast effort=low/);
    // The rules and auth-method travel too: the agent authenticated, and the
    // rule rejected its command on the daemon.
    const decided = events.find((e) => e.type === "permission.decided")!;
    assert.deepEqual([decided.data.decision, decided.data.rule], [
      "reject_once",
      0,
    ]);
  } finally {
    await daemon.stop();
    await serve.stop();
  }
});
