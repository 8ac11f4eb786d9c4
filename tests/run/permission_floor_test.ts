/**
 * The operator's permission policy holds against callers (`runner serve`): a
 * caller's `permission-*` keys may make it stricter, never looser, and a
 * refused request starts nothing.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import type { RunEvent } from "../../lib/events.ts";
import {
  apiFetch,
  fixtureConfig,
  postJson,
  readSse,
  readUntil,
  sseEvents,
  streamUntil,
  terminals,
  withServe,
} from "../serve_test_helpers.ts";

const ASK = ["--allow-custom-commands", "--permission-decision", "ask"];

async function refused(
  url: string,
  workspace: string,
  config: Record<string, unknown>,
): Promise<{ code: string; message: string }> {
  const response = await postJson(`${url}/v1/runs`, {
    input: { text: "write the file" },
    config: { ...fixtureConfig(workspace, ["--permission"]), ...config },
  });
  const body = await response.json();
  assert.equal(response.status, 403, JSON.stringify(body));
  return body.error;
}

Deno.test("a caller's short timeout and approving fallback cannot turn the operator's ask into an approval", async () => {
  await withServe({ args: ASK }, async (serve, dir) => {
    const workspace = join(dir, "ws");
    const error = await refused(serve.url, workspace, {
      "permission-timeout": 1,
      "permission-fallback": "allow_always",
    });
    assert.equal(error.code, "http.forbidden");
    assert.match(error.message, /^permission-fallback: allow_always is looser/);
    assert.match(error.message, /runner serve --permission-fallback/);
    const decision = await refused(serve.url, workspace, {
      "permission-decision": "allow_once",
    });
    assert.match(
      decision.message,
      /^permission-decision: allow_once is looser than the server's ask/,
    );
    const runs = await (await apiFetch(`${serve.url}/v1/runs`)).json();
    assert.deepEqual(runs.runs, []);
  });
});

Deno.test("with an approving operator fallback, a caller may not shorten the timeout but may lengthen it", async () => {
  const args = [...ASK, "--permission-fallback", "allow_once"];
  await withServe({ args }, async (serve, dir) => {
    const workspace = join(dir, "ws");
    const error = await refused(serve.url, workspace, {
      "permission-timeout": 1,
    });
    assert.match(
      error.message,
      /^permission-timeout: 1 s would approve sooner than the server's 120 s/,
    );
    const longer = await postJson(`${serve.url}/v1/runs`, {
      input: { text: "write the file" },
      config: {
        ...fixtureConfig(workspace, ["--permission"]),
        "permission-timeout": 300,
      },
    });
    assert.equal(longer.status, 200);
    const { events, messages } = await streamUntil(
      longer,
      "permission.requested",
    );
    await postJson(`${serve.url}/v1/runs/${events[0].run_id}/cancel`, {})
      .then((r) => r.body?.cancel());
    await readUntil(messages, events, (m) => m.event === "run.failed");
  });
});

Deno.test("a caller may make the operator's ask stricter: a quick rejecting fallback rejects", async () => {
  await withServe({ args: ASK }, async (serve, dir) => {
    const response = await postJson(`${serve.url}/v1/runs`, {
      input: { text: "write the file" },
      config: {
        ...fixtureConfig(join(dir, "ws"), ["--permission"]),
        "permission-timeout": 1,
        "permission-fallback": "reject_always",
      },
    });
    assert.equal(response.status, 200);
    const events: RunEvent[] = [];
    await readUntil(
      readSse(response.body!),
      events,
      (m) => m.event === "permission.decided",
    );
    const decided = events.at(-1)!;
    assert.equal(decided.data.by, "timeout");
    assert.equal(decided.data.decision, "reject_always");
    const stricter = await postJson(`${serve.url}/v1/runs`, {
      input: { text: "write the file" },
      config: {
        ...fixtureConfig(join(dir, "ws"), ["--permission"]),
        "permission-decision": "reject_once",
      },
    });
    assert.equal(stricter.status, 200);
    const ended = terminals(await sseEvents(stricter));
    assert.equal(ended.length, 1);
  });
});
