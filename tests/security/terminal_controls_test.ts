/**
 * The console shows a terminal's output without ANSI escapes and control
 * characters, and a person's terminal hides escapes too. An agent that
 * knows a secret can run a command that prints it with an escape (or a
 * control character) in its middle: no redactor that looks at the raw text
 * recognises it, yet the reader sees it whole. The `terminal.output` events
 * must not show the secret once escapes and control characters are gone.
 *
 * @module
 */

import assert from "node:assert/strict";
import { terminalOutputWithSecret } from "./secret_runs.ts";

const SECRET = "sk-ctrl-SECRET-0123456789abcdef";
/** What the console strips (`lib/server/console/terminals.js`). */
const CONSOLE_STRIPS =
  // deno-lint-ignore no-control-regex -- matching control characters is the point
  /\x1b\[[0-?]*[ -\/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]|\x9b[0-?]*[ -\/]*[@-~]|[\x00-\x08\x0b-\x1f\x7f-\x9f]/g;
const INSERTS: Record<string, string> = {
  "a colour reset": "\\033[0m",
  "a title escape": "\\033]0;t\\007",
  "a control character": "\\001",
  "a carriage return": "\\r",
};

for (const [name, insert] of Object.entries(INSERTS)) {
  Deno.test(`a secret printed with ${name} in its middle does not show in terminal.output`, async () => {
    const script =
      `printf "%s${insert}%s done" "\${API_TOKEN%%CRET*}" "\${API_TOKEN#*SE}"`;
    const terminal = { command: "sh", args: ["-c", script] };
    const shown = (await terminalOutputWithSecret(SECRET, terminal))
      .replace(CONSOLE_STRIPS, "");
    assert.ok(shown.includes(" done"), `the output is shown: ${shown}`);
    assert.ok(!shown.includes(SECRET), `the secret was shown: ${shown}`);
  });
}
