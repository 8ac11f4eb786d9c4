/**
 * The agent's stderr tail is what a failed run shows of its stderr; it keeps
 * the last 64 KiB. An agent that knows a secret can pad its stderr so that
 * the tail begins in the middle of the secret: the secret's end must not
 * show in the failed run's message or its `stderr_tail`.
 *
 * @module
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import { quoteCommand } from "../../lib/agent/shell_words.ts";
import { redactTail } from "../../lib/secrets.ts";
import { secretsAndText } from "../stream_arbitraries.ts";
import { failedEvent, runWithSecrets } from "./secret_runs.ts";

const SECRET = "sk-tail-SECRET-0123456789abcdef";
const TAIL_BYTES = 64 * 1024;

for (const shown of [4, 12, SECRET.length - 1]) {
  Deno.test(`a stderr tail that begins ${shown} characters before a secret's end does not show them`, async () => {
    // The secret, then padding on the same line: the tail's first bytes are
    // the secret's last `shown` characters.
    const padding = TAIL_BYTES - shown;
    const script =
      `printf '%s' "$API_TOKEN" >&2; head -c ${padding} /dev/zero | tr '\\0' x >&2; exit 3`;
    const run = await runWithSecrets(
      { API_TOKEN: SECRET },
      quoteCommand(["sh", "-c", script]),
    );
    const seen = JSON.stringify(failedEvent(run).data) + run.result.stderr;
    assert.ok(
      seen.includes("x".repeat(100)),
      "the stderr tail is shown (the test reaches the guard)",
    );
    const end = SECRET.slice(-shown);
    assert.ok(
      !seen.includes(end + "xxxx"),
      `the secret's last ${shown} characters (${end}) were shown`,
    );
  });
}

Deno.test("redactTail: wherever a text is cut, its tail shows no secret and no end of one at its start", () => {
  fc.assert(
    fc.property(secretsAndText(), fc.nat(), ({ secrets, text }, at) => {
      const tail = redactTail(text.slice(at % (text.length + 1)), secrets);
      for (const secret of secrets) {
        assert.ok(!tail.includes(secret), `${secret} in ${tail}`);
        for (let length = 1; length < secret.length; length++) {
          assert.ok(
            !tail.startsWith(secret.slice(-length)),
            `${secret}'s end at the start of ${tail}`,
          );
        }
      }
    }),
  );
  assert.equal(
    redactTail("cdef and more", ["sk-abcdef"]),
    "[REDACTED] and more",
  );
  assert.equal(redactTail("nothing cut", ["sk-abcdef"]), "nothing cut");
});
