/**
 * A failed run shows the agent's stderr tail (in its message and
 * `stderr_tail`), and a person reads it on a terminal or in the console,
 * where control characters do not show. An agent that knows a secret can
 * write it to stderr with a control character in its middle: no redactor
 * that looks at the raw text recognises it, yet the reader sees it whole.
 *
 * @module
 */

import assert from "node:assert/strict";
import { quoteCommand } from "../../lib/agent/shell_words.ts";
import { failedEvent, runWithSecrets } from "./secret_runs.ts";

const SECRET = "sk-stderr-SECRET-0123456789abcdef";
/** What a reader does not see: escapes and control characters but tab and newline. */
const UNSEEN =
  // deno-lint-ignore no-control-regex -- matching control characters is the point
  /\x1b\[[0-?]*[ -\/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]|\x9b[0-?]*[ -\/]*[@-~]|[\x00-\x08\x0b-\x1f\x7f-\x9f]/g;

for (const [name, insert] of [["SOH", "\\001"], ["DEL", "\\177"]]) {
  Deno.test(`a secret written to stderr with ${name} in its middle does not show in the failure`, async () => {
    const script =
      `printf "said %s${insert}%s\\n" "\${API_TOKEN%%CRET*}" "\${API_TOKEN#*SE}" >&2; exit 3`;
    const run = await runWithSecrets(
      { API_TOKEN: SECRET },
      quoteCommand(["sh", "-c", script]),
    );
    const failed = failedEvent(run);
    const seen = [failed.data.error, failed.data.stderr_tail, run.result.stderr]
      .join("\n").replace(UNSEEN, "");
    assert.ok(seen.includes("said "), `the stderr tail is shown: ${seen}`);
    assert.ok(!seen.includes(SECRET), `the secret was shown: ${seen}`);
  });
}
