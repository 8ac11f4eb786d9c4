/**
 * Interactive approvals over HTTP (`permission-decision=ask`) against a real
 * `runner serve` and the fixture agent: answer allow, answer reject, timeout
 * to the fallback, cancel while asked, and the 404/409/400 answers; a turn
 * that ends without text after any of these rejections fails
 * `run.permission_rejected`, not retryable.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import type { RunEvent } from "../../lib/events.ts";
import {
  agentCommand,
  apiFetch,
  assertStatus,
  deltaText,
  fixtureConfig,
  postJson,
  streamUntil,
  terminals,
  withServe,
} from "../serve_test_helpers.ts";

const ARGS = ["--allow-custom-commands"];

interface AskedRun {
  events: RunEvent[];
  messages: AsyncGenerator<{ event?: string; data: string }>;
  runId: string;
  requestId: string;
}

/** Starts an `ask` run and reads until its `permission.requested`. */
async function startAskedRun(
  url: string,
  workspace: string,
  extraConfig: Record<string, unknown> = {},
): Promise<AskedRun> {
  const response = await postJson(`${url}/v1/runs`, {
    input: { text: "write the file" },
    config: {
      ...fixtureConfig(workspace, ["--permission"]),
      "permission-decision": "ask",
      ...extraConfig,
    },
  });
  assert.equal(response.status, 200);
  const { events, messages } = await streamUntil(
    response,
    "permission.requested",
  );
  const requested = events.at(-1)!;
  return {
    events,
    messages,
    runId: requested.run_id,
    requestId: requested.data.request_id as string,
  };
}

async function readToEnd(run: AskedRun): Promise<RunEvent[]> {
  for await (const message of run.messages) {
    run.events.push(JSON.parse(message.data));
  }
  return run.events;
}

function answer(
  url: string,
  run: AskedRun,
  body: unknown,
  requestId = run.requestId,
) {
  return postJson(
    `${url}/v1/runs/${run.runId}/permissions/${requestId}`,
    body,
  );
}

Deno.test("ask: the request carries the tool call and options, an allow answer lets the tool run", async () => {
  await withServe({ args: ARGS }, async (serve, dir) => {
    const run = await startAskedRun(serve.url, join(dir, "ws"));
    const requested = run.events.at(-1)!;
    assert.deepEqual(requested.data.tool_call, {
      tool_call_id: "perm-1",
      title: "Write file",
      kind: "edit",
      locations: [{ path: "notes.txt", line: null }],
      raw_input_summary: '{"path":"notes.txt","content":"hello"}',
    });
    assert.deepEqual(
      (requested.data.options as { option_id: string }[]).map((o) =>
        o.option_id
      ),
      ["allow_once", "allow_always", "reject_once", "reject_always"],
    );
    assert.ok(Date.parse(requested.data.expires_at as string) > Date.now());

    const answered = await answer(serve.url, run, {
      option_id: "allow_always",
    });
    assert.equal(answered.status, 200);
    assert.deepEqual(await answered.json(), {
      run_id: run.runId,
      request_id: run.requestId,
      answered: true,
    });
    const events = await readToEnd(run);
    const decided = events.find((e) => e.type === "permission.decided")!;
    assert.equal(decided.data.request_id, run.requestId);
    assert.equal(decided.data.decision, "allow_always");
    assert.equal(decided.data.by, "caller");
    assert.equal(
      deltaText(events),
      "permission: allow_always\necho: write the file (turn 1)",
    );
    assert.equal(terminals(events)[0].type, "run.completed");

    const again = await answer(serve.url, run, { decision: "allow_once" });
    assert.equal(again.status, 409);
    assert.equal((await again.json()).error.code, "http.conflict");
  });
});

Deno.test("ask: a reject decision reaches the agent; unknown ids are 404, a second answer 409, bad answers 400", async () => {
  await withServe({ args: ARGS }, async (serve, dir) => {
    const run = await startAskedRun(serve.url, join(dir, "ws"));

    const wrongRequest = await answer(serve.url, run, {
      decision: "allow_once",
    }, "nope");
    await assertStatus(wrongRequest, 404);
    const wrongRun = await postJson(
      `${serve.url}/v1/runs/no-such-run/permissions/${run.requestId}`,
      { decision: "allow_once" },
    );
    await assertStatus(wrongRun, 404);
    const notOffered = await answer(serve.url, run, { option_id: "sudo" });
    assert.equal(notOffered.status, 400);
    assert.match((await notOffered.json()).error.message, /did not offer/);
    const empty = await answer(serve.url, run, {});
    await assertStatus(empty, 400);

    const rejected = await answer(serve.url, run, { decision: "reject_once" });
    await assertStatus(rejected, 200);
    const second = await answer(serve.url, run, { decision: "allow_once" });
    await assertStatus(second, 409);

    const events = await readToEnd(run);
    const decided = events.filter((e) => e.type === "permission.decided");
    assert.equal(decided.length, 1);
    assert.equal(decided[0].data.decision, "reject_once");
    assert.equal(
      deltaText(events),
      "permission: reject_once\necho: write the file (turn 1)",
    );
  });
});

Deno.test("ask: no answer within permission-timeout takes permission-fallback", async () => {
  await withServe({ args: ARGS }, async (serve, dir) => {
    const run = await startAskedRun(serve.url, join(dir, "ws"), {
      "permission-timeout": 1,
      "permission-fallback": "reject_always",
    });
    const events = await readToEnd(run);
    const decided = events.find((e) => e.type === "permission.decided")!;
    assert.equal(decided.data.by, "timeout");
    assert.equal(decided.data.decision, "reject_always");
    assert.equal(
      deltaText(events),
      "permission: reject_always\necho: write the file (turn 1)",
    );
  });
});

Deno.test("ask: cancelling the run answers the open request cancelled", async () => {
  await withServe({ args: ARGS }, async (serve, dir) => {
    const run = await startAskedRun(serve.url, join(dir, "ws"));
    const cancelled = await postJson(
      `${serve.url}/v1/runs/${run.runId}/cancel`,
      {},
    );
    await assertStatus(cancelled, 200);
    const events = await readToEnd(run);
    const decided = events.filter((e) => e.type === "permission.decided");
    assert.equal(decided.length, 1);
    assert.equal(decided[0].data.by, "cancel");
    assert.equal(decided[0].data.decision, "cancelled");
    assert.equal(terminals(events).length, 1);
    assert.equal(terminals(events)[0].data.code, "run.cancelled");
    const late = await answer(serve.url, run, { decision: "allow_once" });
    await assertStatus(late, 409);
  });
});

Deno.test("ask through the n8n webhook, where nobody can answer, takes the fallback at once", async () => {
  await withServe({ args: ARGS }, async (serve, dir) => {
    const config = fixtureConfig(join(dir, "ws"), ["--permission"]);
    const query = new URLSearchParams({
      "acp-command": config["acp-command"] as string,
      provider: "custom",
      workspace: config.workspace as string,
      "permission-decision": "ask",
      "permission-fallback": "reject_always",
      "permission-timeout": "1",
    });
    const response = await postJson(
      `${serve.url}/v1/webhooks/n8n?stream=false&${query}`,
      { chatInput: "write the file", session_id: "n8n-ask" },
    );
    assert.equal(response.status, 200);
    const body = await response.json();
    assert.equal(
      body.response,
      "permission: reject_always\necho: write the file (turn 1)",
    );
    const runs = await (await apiFetch(
      `${serve.url}/v1/runs?conversation_id=n8n-ask`,
    )).json();
    const run = await (await apiFetch(
      `${serve.url}/v1/runs/${runs.runs[0].run_id}`,
    )).json();
    const types = (run.events as RunEvent[]).map((event) => event.type);
    assert.ok(!types.includes("permission.requested"));
    assert.equal(types[0], "permission.unavailable");
    assert.deepEqual(run.events[0].data, {
      reason: "the n8n webhook has no way to answer permission requests",
      fallback: "reject_always",
    });
    const decided = (run.events as RunEvent[]).find((event) =>
      event.type === "permission.decided"
    )!;
    assert.equal(decided.data.by, "policy");
  });
});

/** An agent that, like opencode, ends the turn end_turn with no text after a refusal. */
function silentOnReject(extra: string[] = []): Record<string, unknown> {
  return {
    "acp-command": agentCommand([
      "--permission",
      "--silent-on-reject",
      ...extra,
    ]),
  };
}

/** Asserts the run's one terminal event is a non-retryable run.permission_rejected. */
function assertRejectedRun(events: RunEvent[], refusal: string) {
  const ends = terminals(events);
  assert.equal(ends.length, 1);
  assert.equal(ends[0].type, "run.failed");
  assert.equal(ends[0].data.code, "run.permission_rejected");
  assert.equal(ends[0].data.retryable, false);
  assert.match(
    ends[0].data.error as string,
    new RegExp(`"Write file" was refused \\(${refusal}\\)`),
  );
}

Deno.test("ask: a person's reject, then a turn without text, fails run.permission_rejected, not retryable", async () => {
  await withServe({ args: ARGS }, async (serve, dir) => {
    const run = await startAskedRun(
      serve.url,
      join(dir, "ws"),
      silentOnReject(),
    );
    const rejected = await answer(serve.url, run, { decision: "reject_once" });
    await assertStatus(rejected, 200);
    const events = await readToEnd(run);
    assertRejectedRun(events, "reject_once");
    const stored = await apiFetch(`${serve.url}/v1/runs/${run.runId}`);
    const record = await stored.json();
    assert.equal(record.status, "failed");
  });
});

Deno.test("ask: the timeout's reject fallback, then a turn without text, fails run.permission_rejected", async () => {
  await withServe({ args: ARGS }, async (serve, dir) => {
    const run = await startAskedRun(serve.url, join(dir, "ws"), {
      ...silentOnReject(["--fail-tool-on-reject"]),
      "permission-timeout": 1,
      "permission-fallback": "reject_always",
    });
    const events = await readToEnd(run);
    const decided = events.find((e) => e.type === "permission.decided")!;
    assert.equal(decided.data.by, "timeout");
    assertRejectedRun(events, "reject_always");
  });
});

Deno.test("ask: an answer no offered option fits cancels the request; a turn without text then fails run.permission_rejected", async () => {
  await withServe({ args: ARGS }, async (serve, dir) => {
    const run = await startAskedRun(
      serve.url,
      join(dir, "ws"),
      silentOnReject(["--permission-options", "allow_once,allow_always"]),
    );
    const answered = await answer(serve.url, run, { decision: "reject_once" });
    await assertStatus(answered, 200);
    const events = await readToEnd(run);
    const decided = events.find((e) => e.type === "permission.decided")!;
    assert.equal(decided.data.decision, "cancelled");
    assertRejectedRun(events, "cancelled");
  });
});
