/**
 * An agent that knows two secrets where the end of one is the start of the
 * other can write them overlapped: redacting one whole would leave the
 * other's rest in plain sight. Overlapping secrets are redacted as one.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import type { RunEvent } from "../../lib/events.ts";
import { redactSecrets } from "../../lib/secrets.ts";
import { agentCommand, parseJsonLines, runCli, tempDir } from "../helpers.ts";
import { deltaText } from "../serve_test_helpers.ts";

const FIRST = "sk-first-AAAA-1111";
const SECOND = "1111-BBBB-second-2222";
const OVERLAPPED = "sk-first-AAAA-1111-BBBB-second-2222";

Deno.test("runner run: two secrets written overlapped show no piece of either", async () => {
  const result = await runCli([
    "run",
    "custom",
    ...["--acp-command", agentCommand(["--text", `say ${OVERLAPPED} now`])],
    ...["--workspace", join(await tempDir(), "ws")],
    ...["--env-json", JSON.stringify({ A_TOKEN: FIRST, B_TOKEN: SECOND })],
    "--json",
    "hi",
  ]);
  assert.equal(result.code, 0, result.stderr);
  const events = parseJsonLines(result.stdout) as unknown as RunEvent[];
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
