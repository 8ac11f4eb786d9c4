/**
 * A run whose turn ends without an answer after a failed tool call fails
 * with a message that names the tool (its title cut to 120 characters) and the failure (the tool's output, encoded
 * as JSON when it is not text, cut to 300). An agent that knows a secret
 * can place it so that a cut falls inside it, or rely on JSON escaping its
 * quotes: no part of the secret may show in the failure.
 *
 * @module
 */

import assert from "node:assert/strict";
import { agentCommand } from "../helpers.ts";
import { failedEvent, runWithSecrets } from "./secret_runs.ts";

const SECRET = "sk-fail-SECRET-0123456789abcdef";
const QUOTED_SECRET = 'pass"word\\with-quotes-42';
const OUTPUT_CHARS = 299;
const TITLE_CHARS = 119;

async function failure(
  secret: string,
  flags: string[],
): Promise<{ code: string; seen: string }> {
  const run = await runWithSecrets({ API_TOKEN: secret }, agentCommand(flags));
  const failed = failedEvent(run);
  return {
    code: String(failed.data.code),
    seen: `${failed.data.error}\n${run.result.stderr}`,
  };
}

function failedTool(output: unknown, title = "Run"): string[] {
  const update = {
    sessionUpdate: "tool_call",
    toolCallId: "t1",
    title,
    kind: "execute",
    status: "failed",
    rawOutput: output,
  };
  return ["--script", JSON.stringify([["update", JSON.stringify(update)]])];
}

for (const shown of [4, 12, SECRET.length - 1]) {
  Deno.test(`a failed tool's output cut ${shown} characters into a secret does not show them`, async () => {
    const padding = "x".repeat(OUTPUT_CHARS - shown);
    const { code, seen } = await failure(
      SECRET,
      failedTool(`${padding}${SECRET} and more`),
    );
    assert.equal(code, "run.tool_failed");
    assert.ok(seen.includes(padding), "the output is shown");
    const start = SECRET.slice(0, shown);
    assert.ok(!seen.includes(padding + start), `${start} was shown`);
  });

  Deno.test(`a failed tool's title cut ${shown} characters into a secret does not show them`, async () => {
    const padding = "x".repeat(TITLE_CHARS - shown);
    const { code, seen } = await failure(
      SECRET,
      failedTool("", `${padding}${SECRET} and more`),
    );
    assert.equal(code, "run.tool_failed");
    assert.ok(seen.includes(padding), "the title is shown");
    const start = SECRET.slice(0, shown);
    assert.ok(!seen.includes(padding + start), `${start} was shown`);
  });
}

Deno.test("a failed tool's output encoded as JSON does not show a secret escaped", async () => {
  const { code, seen } = await failure(
    QUOTED_SECRET,
    failedTool({ error: `say ${QUOTED_SECRET} now` }),
  );
  assert.equal(code, "run.tool_failed");
  assert.ok(seen.includes("say "), "the output is shown");
  const escaped = JSON.stringify(QUOTED_SECRET).slice(1, -1);
  assert.ok(!seen.includes(escaped), `${escaped} was shown`);
});
