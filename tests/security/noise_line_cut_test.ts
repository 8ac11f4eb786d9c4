/**
 * A line the agent prints on stdout that is not JSON-RPC is logged, cut to
 * its first 200 characters. An agent that knows a secret can pad such a line
 * so that the cut falls inside the secret: the secret's start must not show
 * in the service log.
 *
 * @module
 */

import assert from "node:assert/strict";
import { quoteCommand } from "../../lib/agent/shell_words.ts";
import { fixtureArgv } from "../helpers.ts";
import { postJson, sseEvents } from "../serve_test_helpers.ts";
import { withSecretServe } from "./secret_runs.ts";

const SECRET = "sk-noise-SECRET-0123456789abcdef";
const LOGGED_CHARS = 200;

Deno.test("a stdout noise line cut inside a secret does not show the secret's start in the log", async () => {
  await withSecretServe({ API_TOKEN: SECRET }, async (serve) => {
    for (const shown of [4, 12, SECRET.length - 1]) {
      const padding = "x".repeat(LOGGED_CHARS - shown);
      const script = `printf '%s%s\\n' '${padding}' "$API_TOKEN"; exec ${
        quoteCommand(fixtureArgv())
      }`;
      const events = await sseEvents(
        await postJson(`${serve.url}/v1/runs`, {
          input: { text: "hi" },
          config: { "acp-command": quoteCommand(["sh", "-c", script]) },
        }),
      );
      assert.equal(events.at(-1)?.type, "run.completed");
      const noise = await serve.waitForLog((entry) =>
        entry.msg === "agent stdout noise" &&
        String(entry.line).startsWith(padding) &&
        !String(entry.line).startsWith(padding + "x")
      );
      const start = SECRET.slice(0, shown);
      assert.ok(
        !String(noise.line).includes(start),
        `the secret's first ${shown} characters (${start}) were logged: ${noise.line}`,
      );
      assert.ok(!serve.stderr().includes(start), `${start} in the log`);
    }
  });
});
