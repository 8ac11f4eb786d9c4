/**
 * A run that has ended is not kept in memory: its state (and with it the
 * answer's text) can be collected at once, not only after `startup-timeout`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { ROOT } from "../helpers.ts";

Deno.test("nothing holds a finished run (the startup timer lets go of it)", async () => {
  const output = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      "--v8-flags=--expose-gc",
      `${ROOT}tests/fixtures/run_retention.ts`,
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.ok(output.success, new TextDecoder().decode(output.stderr));
  assert.equal(new TextDecoder().decode(output.stdout).trim(), "released");
});
