/**
 * A permission request shows the tool call's input as `raw_input_summary`:
 * its JSON, cut to 400 characters. An agent that knows a secret can put it
 * in the input so that the cut falls inside it, or rely on JSON escaping a
 * secret's quotes and backslashes: neither the secret's start nor the
 * escaped secret may show in the `permission.requested` event.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  agentCommand,
  apiFetch,
  postJson,
  streamUntil,
} from "../serve_test_helpers.ts";
import { withSecretServe } from "./secret_runs.ts";

const SECRET = "sk-perm-SECRET-0123456789abcdef";
const QUOTED_SECRET = 'pass"word\\with-quotes-42';
const SUMMARY_CHARS = 399;
/** `{"content":"`: what the summary shows before the padding. */
const BEFORE_PADDING = 12;

async function requestedSummary(
  url: string,
  input: unknown,
): Promise<string> {
  const calls = [{ kind: "edit", title: "Write", path: "a.txt", input }];
  const response = await postJson(`${url}/v1/runs`, {
    input: { text: "hi" },
    config: {
      "acp-command": agentCommand([
        ...["--permission-calls", JSON.stringify(calls)],
      ]),
      "permission-decision": "ask",
    },
  });
  assert.equal(response.status, 200);
  const { events, messages } = await streamUntil(
    response,
    "permission.requested",
  );
  const requested = events.at(-1)!;
  const cancel = await apiFetch(`${url}/v1/runs/${requested.run_id}/cancel`, {
    method: "POST",
  });
  await cancel.body?.cancel();
  for await (const _ of messages) { /* to the end */ }
  const stored = await apiFetch(`${url}/v1/runs/${requested.run_id}/events`);
  const all = await stored.text();
  const toolCall = requested.data.tool_call as { raw_input_summary: string };
  return `${toolCall.raw_input_summary}\n${all}`;
}

Deno.test("a permission request's input summary cut inside a secret does not show the secret's start", async () => {
  await withSecretServe({ API_TOKEN: SECRET }, async (serve) => {
    for (const shown of [4, 12, SECRET.length - 1]) {
      const padding = "x".repeat(SUMMARY_CHARS - BEFORE_PADDING - shown);
      const seen = await requestedSummary(serve.url, {
        content: padding + SECRET,
      });
      assert.ok(seen.includes(padding), "the summary is shown");
      const start = SECRET.slice(0, shown);
      assert.ok(
        !seen.includes(padding + start),
        `the secret's first ${shown} characters (${start}) were shown`,
      );
    }
  });
});

Deno.test("a permission request's input summary does not show a secret JSON escaped", async () => {
  await withSecretServe({ API_TOKEN: QUOTED_SECRET }, async (serve) => {
    const seen = await requestedSummary(serve.url, {
      content: `say ${QUOTED_SECRET} now`,
    });
    assert.ok(seen.includes("say "), "the summary is shown");
    const escaped = JSON.stringify(QUOTED_SECRET).slice(1, -1);
    assert.ok(!seen.includes(escaped), `${escaped} was shown`);
    assert.ok(!seen.includes(JSON.stringify(escaped).slice(1, -1)));
  });
});
