/**
 * A terminal keeps at most the agent's `outputByteLimit` of output, cut from
 * the start. An agent that knows a secret can ask for a small limit and run
 * a command that prints the secret in one write: the cut keeps the secret's
 * end, which must not show in the run's `terminal.output` events.
 *
 * @module
 */

import assert from "node:assert/strict";
import { terminalOutputWithSecret } from "./secret_runs.ts";

const SECRET = "sk-term-SECRET-0123456789abcdef";

for (const shown of [4, 12, SECRET.length - 1]) {
  Deno.test(`a terminal limit that keeps a secret's last ${shown} characters does not show them in terminal.output`, async () => {
    const terminal = {
      command: "sh",
      args: ["-c", 'printf "%s done" "$API_TOKEN"'],
      outputByteLimit: shown + " done".length,
    };
    const output = await terminalOutputWithSecret(SECRET, terminal);
    assert.ok(output.includes(" done"), `the output is shown: ${output}`);
    const end = SECRET.slice(-shown);
    assert.ok(
      !output.includes(end),
      `the secret's last ${shown} characters (${end}) were shown: ${output}`,
    );
  });
}
