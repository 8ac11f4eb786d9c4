/**
 * `agent-idle-timeout` and `max-warm-agents`: defaults, sources and the
 * errors for bad values, for `runner serve` and `runner daemon`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { RunnerError } from "../../lib/errors.ts";
import {
  loadServeConfig,
  type ServeConfig,
} from "../../lib/server/config/serve_config.ts";
import { daemonCliArgs, runCli } from "../helpers.ts";

/** Only named: loading the config creates nothing there. */
const DATA = ["--data-dir", "/nonexistent/runner-data"];

Deno.test("runner serve keeps 16 agents warm for 300 s unless told otherwise", async () => {
  const defaults = await loadServeConfig(DATA, { env: {} }) as ServeConfig;
  assert.deepEqual(defaults.warmAgents, { idleTimeout: 300, maxAgents: 16 });
  const set = await loadServeConfig([...DATA, "--agent-idle-timeout", "0"], {
    env: { RUNNER_MAX_WARM_AGENTS: "3" },
  }) as ServeConfig;
  assert.deepEqual(set.warmAgents, { idleTimeout: 0, maxAgents: 3 });
});

Deno.test("bad warm-agent settings are config.invalid naming the option", async (t) => {
  const cases: Array<[string[], RegExp]> = [
    [["--agent-idle-timeout", "soon"], /agent-idle-timeout/],
    [
      ["--agent-idle-timeout", "9999999"],
      /agent-idle-timeout: must be at most/,
    ],
    [["--max-warm-agents", "2.5"], /max-warm-agents: must be a whole number/],
  ];
  for (const [args, message] of cases) {
    await t.step(args.join(" "), async () => {
      await assert.rejects(
        () => loadServeConfig([...DATA, ...args], { env: {} }),
        (error) =>
          error instanceof RunnerError && error.code === "config.invalid" &&
          message.test(error.message),
      );
    });
  }
});

Deno.test("runner daemon refuses a bad --max-warm-agents before it connects", async () => {
  const result = await runCli(
    daemonCliArgs("ws://127.0.0.1:9", "desk", "--max-warm-agents", "-1"),
  );
  assert.equal(result.code, 2, result.stderr);
  assert.match(result.stderr, /max-warm-agents/);
});
