/**
 * The n8n-compatible webhook of a real `runner serve`: n8n's request shape
 * in, its streaming (`item` … `end`) or single-object answer out, its auth
 * modes, and waiting for a conversation's previous run.
 *
 * @module
 */

import assert from "node:assert/strict";
import { sign } from "hono/jwt";
import {
  apiFetch,
  jsonLines,
  openGate,
  postJson,
  type ServeProcess,
  withFixtureServe,
  withGatedServe,
} from "../serve_test_helpers.ts";

Deno.test("the n8n webhook streams item objects then end, in the n8n shape", async () => {
  await withFixtureServe({
    fixtureFlags: ["--chunks", "3", "--text", "one two three"],
    args: [
      "--delta-coalesce-ms",
      "0",
      "--n8n-merge-ms",
      "0",
      // Exact items: no run token, whose first letter would hold back an
      // item's last one ("t", "e") until the next.
      "--langbot-assets-enabled",
      "false",
    ],
  }, async (serve) => {
    const response = await postJson(`${serve.url}/v1/webhooks/n8n`, {
      chatInput: "hello",
      session_id: "n8n-session",
      user_id: "u1",
      extra: { anything: true },
    });
    assert.equal(response.status, 200);
    assert.match(response.headers.get("content-type")!, /^application\/json/);
    const items = await jsonLines(response);
    assert.deepEqual(items, [
      { type: "item", content: "one t" },
      { type: "item", content: "wo t" },
      { type: "item", content: "hree" },
      { type: "end" },
    ]);

    const whole = await postJson(`${serve.url}/v1/webhooks/n8n?stream=false`, {
      message: "hello",
      conversation_id: "c",
    });
    const body = await whole.json();
    assert.equal(body.response, "one two three");

    const runs =
      await (await apiFetch(`${serve.url}/v1/runs?conversation_id=n8n-session`))
        .json();
    assert.equal(runs.runs.length, 1);
  });
});

Deno.test("the n8n webhook reports a failed run as a readable item before end, or as an error object with ?errors=json", async () => {
  await withFixtureServe({
    fixtureFlags: ["--exit-mid-prompt"],
    args: ["--n8n-output-key", "output"],
  }, async (serve) => {
    const items = await jsonLines(
      await postJson(`${serve.url}/v1/webhooks/n8n`, {
        user_message_text: "boom",
      }),
    );
    assert.deepEqual(items.at(-1), { type: "end" });
    const failure = items.at(-2)!;
    assert.equal(failure.type, "item");
    assert.match(
      String(failure.content),
      /^(\n\n)?⚠ The agent run failed: .*fixture crashing.* \(acp\.process_exited\)$/s,
    );
    assert.ok(
      items.every((item) => item.type === "item" || item.type === "end"),
    );

    const machine = await jsonLines(
      await postJson(`${serve.url}/v1/webhooks/n8n?errors=json`, {
        chatInput: "boom",
      }),
    );
    assert.deepEqual(machine.at(-1), { type: "end" });
    assert.equal(machine.at(-2)!.type, "error");
    assert.equal(machine.at(-2)!.code, "acp.process_exited");
    assert.match(String(machine.at(-2)!.content), /fixture crashing/);

    const whole = await postJson(`${serve.url}/v1/webhooks/n8n?stream=false`, {
      chatInput: "boom",
    });
    assert.equal(whole.status, 200);
    const readable = JSON.parse(await whole.text());
    assert.match(readable.output, /^⚠ The agent run failed: /);
    assert.equal(readable.error.code, "acp.process_exited");

    const strict = await postJson(
      `${serve.url}/v1/webhooks/n8n?stream=false&errors=json`,
      { chatInput: "boom" },
    );
    assert.equal(strict.status, 502);
    assert.equal((await strict.json()).error.code, "acp.process_exited");
  });
});

/**
 * A streamed webhook call of `sessionId` whose first item has arrived (its
 * agent then waits at the gate); returns the stream's reader and that text.
 */
async function firstItemArrived(serve: ServeProcess, sessionId: string) {
  const first = await postJson(`${serve.url}/v1/webhooks/n8n`, {
    chatInput: "first",
    session_id: sessionId,
  });
  const reader = first.body!.pipeThrough(new TextDecoderStream()).getReader();
  const text = (await reader.read()).value!;
  assert.match(text, /"type":"item"/);
  return { reader, text };
}

/** The runs of `conversation` as `GET /v1/runs` lists them, newest first. */
async function conversationRuns(
  serve: ServeProcess,
  conversation: string,
): Promise<{ status: string; created_at: number; finished_at: number }[]> {
  const response = await apiFetch(
    `${serve.url}/v1/runs?conversation_id=${conversation}`,
  );
  return (await response.json()).runs;
}

Deno.test("a webhook call for a busy conversation waits for its run, then runs its own", async () => {
  await withGatedServe({}, async (serve, gate) => {
    const { reader, text } = await firstItemArrived(serve, "busy");
    let firstText = text;
    const second = postJson(`${serve.url}/v1/webhooks/n8n?stream=false`, {
      chatInput: "second",
      session_id: "busy",
    });
    await serve.waitForLog((entry) =>
      entry.msg === "n8n webhook waits for the conversation" &&
      entry.conversation_id === "busy"
    );
    await openGate(gate);
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      firstText += value;
    }
    assert.match(firstText, /echo: first/);
    await openGate(gate);
    const answer = await (await second).json();
    assert.match(answer.response, /echo: second/);
    const runs = await conversationRuns(serve, "busy");
    assert.deepEqual(runs.map((run) => run.status), [
      "completed",
      "completed",
    ]);
    const [secondRun, firstRun] = runs;
    assert.ok(
      secondRun.created_at >= firstRun.finished_at,
      "the second run started before the first ended",
    );
  });
});

Deno.test("a webhook call whose conversation stays busy past --n8n-wait-seconds gets 409 http.conversation_busy", async () => {
  await withGatedServe(
    { args: ["--n8n-wait-seconds", "0.2"] },
    async (serve, gate) => {
      const { reader } = await firstItemArrived(serve, "held");
      // A guard, not a measurement: a server that never gives up waiting
      // would hold this call (and the test) for as long as the first run.
      const busy = await apiFetch(`${serve.url}/v1/webhooks/n8n`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ chatInput: "second", session_id: "held" }),
        signal: AbortSignal.timeout(60_000),
      });
      assert.equal(busy.status, 409);
      const body = await busy.json();
      assert.equal(body.error.code, "http.conversation_busy");
      assert.equal(body.error.retryable, true);
      assert.match(body.error.message, /still has an active run .* 0\.2 s/);
      assert.match(body.error.message, /POST \/v1\/runs\/.+\/cancel/);
      await openGate(gate);
      while (!(await reader.read()).done) { /* the first run ends */ }
      assert.deepEqual(
        (await conversationRuns(serve, "held")).map((run) => run.status),
        ["completed"],
        "the refused call started no run",
      );
    },
  );
});

Deno.test("webhook calls queued on one busy conversation run one at a time, each with its own answer", async () => {
  await withGatedServe({}, async (serve, gate) => {
    const seen = new Set<Record<string, unknown>>();
    const nextLog = async (msg: string) => {
      const entry = await serve.waitForLog((line) =>
        line.msg === msg && !seen.has(line)
      );
      seen.add(entry);
      return entry;
    };
    const activeRuns = async () =>
      (await (await apiFetch(
        `${serve.url}/v1/runs?conversation_id=queued&status=active`,
      )).json()).runs.length;
    const post = (text: string) =>
      postJson(`${serve.url}/v1/webhooks/n8n?stream=false`, {
        chatInput: text,
        session_id: "queued",
      });

    const first = post("first");
    await nextLog("n8n webhook run");
    const second = post("second");
    const third = post("third");
    await nextLog("n8n webhook waits for the conversation");
    await nextLog("n8n webhook waits for the conversation");
    for (let started = 1; started < 3; started++) {
      await openGate(gate);
      await nextLog("n8n webhook run");
      assert.equal(await activeRuns(), 1);
    }
    await openGate(gate);
    const answers = await Promise.all(
      [first, second, third].map(async (response) => {
        assert.equal((await response).status, 200);
        return (await (await response).json()).response as string;
      }),
    );
    assert.match(answers[0], /^echo: first /);
    assert.match(answers[1], /^echo: second /);
    assert.match(answers[2], /^echo: third /);

    const { runs } = await (await apiFetch(
      `${serve.url}/v1/runs?conversation_id=queued`,
    )).json() as {
      runs: { status: string; created_at: string; finished_at: string }[];
    };
    assert.deepEqual(runs.map((run) => run.status), [
      "completed",
      "completed",
      "completed",
    ]);
    const ordered = runs.toSorted((a, b) =>
      a.created_at.localeCompare(b.created_at)
    );
    for (let i = 1; i < ordered.length; i++) {
      assert.ok(
        ordered[i].created_at >= ordered[i - 1].finished_at,
        `run ${i + 1} started before run ${i} finished`,
      );
    }
    assert.equal(await activeRuns(), 0);
  });
});

Deno.test("the n8n webhook enforces basic, header and jwt auth", async () => {
  const body = { chatInput: "hi" };
  const modes: {
    args: string[];
    challenge: string;
    wrong: Record<string, string>;
    right: Record<string, string>;
  }[] = [{
    args: [
      ...["--n8n-auth", "basic", "--n8n-auth-user", "bot"],
      ...["--n8n-auth-password", "pw-123456"],
    ],
    challenge: 'Basic realm="runner"',
    wrong: { authorization: `Basic ${btoa("bot:nope")}` },
    right: { authorization: `Basic ${btoa("bot:pw-123456")}` },
  }, {
    args: [
      ...["--n8n-auth", "header", "--n8n-auth-header-name", "x-key"],
      ...["--n8n-auth-header-value", "hv-123456"],
    ],
    challenge: "Header",
    wrong: { "x-key": "nope" },
    right: { "x-key": "hv-123456" },
  }, {
    args: ["--n8n-auth", "jwt", "--n8n-jwt-secret", "jwt-secret-123456"],
    challenge: "Bearer",
    wrong: {
      authorization: `Bearer ${await sign(
        { sub: "bot" },
        "other-secret",
        "HS256",
      )}`,
    },
    right: {
      authorization: `Bearer ${await sign(
        { sub: "bot" },
        "jwt-secret-123456",
        "HS256",
      )}`,
    },
  }];
  for (const mode of modes) {
    await withFixtureServe({ args: mode.args }, async (serve) => {
      const url = `${serve.url}/v1/webhooks/n8n?stream=false`;
      const none = await postJson(url, body);
      assert.equal(none.status, 401, mode.challenge);
      await none.body?.cancel();
      const wrong = await postJson(url, body, mode.wrong);
      assert.equal(wrong.status, 401, mode.challenge);
      assert.equal(wrong.headers.get("www-authenticate"), mode.challenge);
      assert.equal((await wrong.json()).error.code, "http.unauthorized");
      const right = await postJson(url, body, mode.right);
      assert.equal(right.status, 200, mode.challenge);
      await right.body?.cancel();
    });
  }
});
