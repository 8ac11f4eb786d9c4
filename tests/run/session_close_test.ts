/**
 * `session/close` through `runner run` and the fixture agent: a completed run
 * with `reuse-session=false` closes its session before the agent is stopped,
 * only where the agent advertises `sessionCapabilities.close`; so does a warm
 * agent leaving the pool (`DELETE /v1/agents/{id}`, a deleted conversation).
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import {
  customRunArgs,
  fixtureCommand,
  readRecord,
  runCli,
  tempDir,
} from "../helpers.ts";
import {
  apiFetch,
  fixtureConfig,
  postJson,
  sseEvents,
  withServe,
} from "../serve_test_helpers.ts";

async function methodsOf(flags: string[], reuse: string): Promise<string[]> {
  const record = join(tempDir(), "record.jsonl");
  const result = await runCli(
    customRunArgs(
      fixtureCommand(...flags, "--record", record),
      join(tempDir(), "ws"),
      ["--data-dir", tempDir(), "--reuse-session", reuse, "hi"],
    ),
  );
  assert.equal(result.code, 0, result.stderr);
  return readRecord(record).map((r) => r.method as string).filter(Boolean);
}

Deno.test("reuse-session=false closes the session (session/close after the prompt) where the agent advertises it", async () => {
  const closed = await methodsOf(["--close"], "false");
  assert.deepEqual(closed.slice(-2), ["session/prompt", "session/close"]);
  const unadvertised = await methodsOf([], "false");
  assert.ok(!unadvertised.includes("session/close"));
  const reused = await methodsOf(["--close"], "true");
  assert.ok(!reused.includes("session/close"));
});

Deno.test("runner serve: a warm agent stopped by DELETE /v1/agents/{id} or a deleted conversation closes its session first", async () => {
  await withServe({ args: ["--allow-custom-commands"] }, async (serve, dir) => {
    for (const how of ["agent", "conversation"]) {
      const record = join(dir, `${how}.jsonl`);
      const response = await postJson(`${serve.url}/v1/runs`, {
        conversation_id: `close-${how}`,
        input: { text: "hi" },
        config: fixtureConfig(join(dir, "ws"), ["--close", "--record", record]),
      });
      const events = await sseEvents(response);
      assert.equal(events.at(-1)!.type, "run.completed");
      const { agents } = await (await apiFetch(`${serve.url}/v1/agents`))
        .json();
      const agent = agents.find((a: { conversation_id: string }) =>
        a.conversation_id === `close-${how}`
      );
      assert.ok(agent, "kept warm");
      const target = how === "agent"
        ? `${serve.url}/v1/agents/${agent.agent_id}`
        : `${serve.url}/v1/conversations/close-${how}`;
      const deleted = await apiFetch(target, { method: "DELETE" });
      await deleted.body?.cancel();
      assert.ok(deleted.ok, `${how}: ${deleted.status}`);
      const methods = readRecord(record).map((r) => r.method).filter(Boolean);
      assert.deepEqual(methods.slice(-2), ["session/prompt", "session/close"]);
      const closed = readRecord(record).find((r) =>
        r.method === "session/close"
      )!;
      assert.equal(
        (closed.params as { sessionId: string }).sessionId,
        agent.session_id,
      );
    }
  });
});
