/**
 * The n8n webhook as LangBot's n8n runner uses it: keep-alives while the
 * agent is silent, an answer whose caller timed out delivered ahead of the
 * conversation's next answer, and JWTs signed with any HMAC algorithm
 * (LangBot's "Algorithm" field) while `none` and public-key tokens are
 * refused with a reason.
 *
 * @module
 */

import assert from "node:assert/strict";
import { sign } from "hono/jwt";
import {
  jsonLines,
  openGate,
  postJson,
  type ServeProcess,
  withFixtureServe,
  withGatedServe,
} from "../serve_test_helpers.ts";
import {
  postAbortable,
  readRest,
  readUntilText,
  textReader,
  within,
} from "../stream_helpers.ts";

/** LangBot's webhook body (its n8n runner's payload fields). */
function langbotBody(text: string, conversation: string) {
  return {
    chatInput: text,
    message: text,
    user_message_text: text,
    conversation_id: conversation,
    session_id: "person_12345",
    user_id: "person_12345",
    msg_create_time: "",
  };
}

/** Waits for the next `n8n webhook run` log line of `conversation`. */
async function runStarted(
  serve: {
    waitForLog(
      p: (e: Record<string, unknown>) => boolean,
    ): Promise<Record<string, unknown>>;
  },
  conversation: string,
  seen: Set<unknown>,
): Promise<void> {
  const entry = await serve.waitForLog((line) =>
    line.msg === "n8n webhook run" && line.conversation_id === conversation &&
    !seen.has(line.run_id)
  );
  seen.add(entry.run_id);
}

/** A gated fixture serve that writes keep-alives every 50 ms (how it notices a caller that left). */
function withKeepaliveServe(
  fixtureFlags: string[],
  body: (serve: ServeProcess, gate: string) => Promise<void>,
): Promise<void> {
  return withGatedServe({
    fixtureFlags,
    args: ["--keepalive-seconds", "0.05"],
  }, body);
}

/** Where a LangBot call goes: the webhook `url`, its conversation, and the runs of it seen started. */
interface AbandonedCall {
  url: string;
  conversation: string;
  started: Set<unknown>;
}

/**
 * A first message of `conversation` whose caller leaves (LangBot's timeout)
 * once it has read what `seen` accepts, while the agent still works; resolves
 * once the runner noticed. Returns the call's answer.
 */
async function abandonedCall(
  serve: ServeProcess,
  call: AbandonedCall & { seen: (text: string) => boolean },
): Promise<Response> {
  const { url, conversation } = call;
  const timedOut = new AbortController();
  const first = await postAbortable(
    url,
    langbotBody("first", conversation),
    timedOut.signal,
  );
  await runStarted(serve, conversation, call.started);
  await readUntilText(textReader(first), call.seen);
  timedOut.abort();
  await within(
    serve.waitForLog((entry) =>
      String(entry.msg).startsWith("n8n caller left") &&
      entry.conversation_id === conversation
    ),
    "the runner noticing the caller left",
  );
  return first;
}

/**
 * The second message of `conversation`, sent while the abandoned first run
 * still waits at the gate: opens the gate for both runs and returns the
 * second's answer.
 */
async function secondAfterAbandoned(
  serve: ServeProcess,
  call: AbandonedCall & { gate: string },
): Promise<Response> {
  const { url, conversation } = call;
  const second = postJson(url, langbotBody("second", conversation));
  await openGate(call.gate);
  await runStarted(serve, conversation, call.started);
  await openGate(call.gate);
  return await second;
}

/** The text a LangBot user sees: every item's content, in order. */
function itemText(lines: Record<string, unknown>[]): string {
  return lines.filter((line) => line.type === "item").map((line) =>
    line.content
  ).join("");
}

Deno.test("the n8n stream sends a newline while the agent is silent", async () => {
  await withKeepaliveServe([], async (serve, gate) => {
    const response = await postJson(
      `${serve.url}/v1/webhooks/n8n`,
      langbotBody("quiet", "conv-quiet"),
    );
    const reader = textReader(response);
    const text = await within(
      readUntilText(reader, (sofar) => /"item"[^\n]*\n\n/.test(sofar)),
      "a keep-alive newline after the first item",
    );
    await openGate(gate);
    const rest = await readRest(reader);
    const lines = (text + rest).split("\n").filter((line) => line.trim())
      .map((line) => JSON.parse(line));
    assert.deepEqual(lines.at(-1), { type: "end" });
    assert.equal(itemText(lines), "echo: quiet (turn 1)");
  });
});

Deno.test("an answer whose LangBot caller timed out goes ahead of the conversation's next answer", async () => {
  await withKeepaliveServe(["--chunks", "2"], async (serve, gate) => {
    const url = `${serve.url}/v1/webhooks/n8n`;
    const started = new Set<unknown>();
    await abandonedCall(serve, {
      url,
      conversation: "conv-late",
      started,
      seen: (text) => text.includes('"item"'),
    });

    // The next message waits for that run, then gets its answer first.
    const lines = await jsonLines(
      await secondAfterAbandoned(serve, {
        url,
        conversation: "conv-late",
        started,
        gate,
      }),
    );
    assert.deepEqual(lines.at(-1), { type: "end" });
    // The conversation's agent stayed warm: its session goes on (turn 2).
    assert.equal(
      itemText(lines),
      "↩ The answer to your earlier message (it was not ready in time):\n\n" +
        "echo: first (turn 1)\n\n---\n\n" +
        "echo: second (turn 2)",
    );

    // Delivered once: the third message gets only its own answer.
    const third = postJson(url, langbotBody("third", "conv-late"));
    await runStarted(serve, "conv-late", started);
    await openGate(gate);
    assert.equal(
      itemText(await jsonLines(await third)),
      "echo: third (turn 3)",
    );
  });
});

Deno.test("with ?stream=false too, an undelivered answer goes ahead of the next one", async () => {
  await withKeepaliveServe([], async (serve, gate) => {
    const url = `${serve.url}/v1/webhooks/n8n?stream=false`;
    const started = new Set<unknown>();
    const first = await abandonedCall(serve, {
      url,
      conversation: "conv-json",
      started,
      seen: (text) => text.includes("\n"),
    });
    assert.equal(first.status, 200);
    const second = await secondAfterAbandoned(serve, {
      url,
      conversation: "conv-json",
      started,
      gate,
    });
    const answer = JSON.parse(await second.text());
    assert.equal(
      answer.response,
      "↩ The answer to your earlier message (it was not ready in time):\n\n" +
        "echo: first (turn 1)\n\n---\n\necho: second (turn 2)",
    );
  });
});

function base64url(value: unknown): string {
  return btoa(JSON.stringify(value)).replaceAll("+", "-").replaceAll("/", "_")
    .replace(/=+$/, "");
}

Deno.test("jwt auth accepts HS256, HS384 and HS512 and refuses none and RS256 with a reason", async () => {
  const secret = "jwt-secret-123456";
  await withFixtureServe({
    args: ["--n8n-auth", "jwt", "--n8n-jwt-secret", secret],
  }, async (serve) => {
    const url = `${serve.url}/v1/webhooks/n8n?stream=false`;
    const body = langbotBody("hi", "conv-jwt");
    const now = Math.floor(Date.now() / 1000);
    // What LangBot's n8n runner signs (PyJWT): exp, iat, sub.
    const claims = { exp: now + 3600, iat: now, sub: "n8n-webhook" };
    for (
      const [index, alg] of (["HS256", "HS384", "HS512"] as const).entries()
    ) {
      const token = await sign(claims, secret, alg);
      const response = await postJson(url, body, {
        authorization: `Bearer ${token}`,
      });
      assert.equal(response.status, 200, alg);
      // One conversation, its agent kept warm: the session goes on.
      assert.equal(
        JSON.parse(await response.text()).response,
        `echo: hi (turn ${index + 1})`,
      );
    }
    const expired = await sign({ ...claims, exp: now - 10 }, secret, "HS512");
    const stale = await postJson(url, body, {
      authorization: `Bearer ${expired}`,
    });
    assert.equal(stale.status, 401);
    assert.equal((await stale.json()).error.message, "Unauthorized.");

    const unsigned = `${base64url({ alg: "none", typ: "JWT" })}.${
      base64url(claims)
    }.`;
    const none = await postJson(url, body, {
      authorization: `Bearer ${unsigned}`,
    });
    assert.equal(none.status, 401);
    assert.equal(none.headers.get("www-authenticate"), "Bearer");
    assert.match((await none.json()).error.message, /alg none.*HS256/);

    const rsa = `${base64url({ alg: "RS256", typ: "JWT" })}.${
      base64url(claims)
    }.c2ln`;
    const publicKey = await postJson(url, body, {
      authorization: `Bearer ${rsa}`,
    });
    assert.equal(publicKey.status, 401);
    assert.match(
      (await publicKey.json()).error.message,
      /"RS256" is not accepted.*HS256, HS384 or HS512/,
    );
  });
});
