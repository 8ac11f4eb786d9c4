/**
 * An agent that knows two secrets where the end of one is the start of the
 * other can write them overlapped: redacting one whole would leave the
 * other's rest in plain sight. Overlapping secrets are redacted as one.
 *
 * @module
 */

import assert from "node:assert/strict";
import { redactSecrets } from "../../lib/secrets.ts";
import { agentCommand } from "../helpers.ts";
import { deltaText } from "../serve_test_helpers.ts";
import { runWithSecrets } from "./secret_runs.ts";

const FIRST = "sk-first-AAAA-1111";
const SECOND = "1111-BBBB-second-2222";
const OVERLAPPED = "sk-first-AAAA-1111-BBBB-second-2222";

Deno.test("runner run: two secrets written overlapped show no piece of either", async () => {
  const { result, events } = await runWithSecrets(
    { A_TOKEN: FIRST, B_TOKEN: SECOND },
    agentCommand(["--text", `say ${OVERLAPPED} now`]),
  );
  assert.equal(result.code, 0, result.stderr);
  assert.equal(deltaText(events), "say [REDACTED] now");
  for (const piece of ["sk-first", "AAAA", "BBBB", "second"]) {
    assert.ok(!result.stdout.includes(piece), `${piece} was shown`);
  }
});

Deno.test("redactSecrets: overlapping occurrences are one redaction, in any order of the list", () => {
  for (const secrets of [[FIRST, SECOND], [SECOND, FIRST]]) {
    assert.equal(
      redactSecrets(`a ${OVERLAPPED} b ${FIRST} c`, secrets),
      "a [REDACTED] b [REDACTED] c",
    );
  }
  assert.equal(redactSecrets("abab-abab-ab", ["abab-ab"]), "[REDACTED]");
});
