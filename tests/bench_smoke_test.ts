/**
 * `deno task bench --short` still works: every path runs and is reported.
 * (The bench measures; nothing here judges its numbers.)
 *
 * @module
 */

import assert from "node:assert/strict";
import { ROOT } from "./helpers.ts";

Deno.test("deno task bench --short measures every path against the bare client", async () => {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", `${ROOT}scripts/bench.ts`, "--short"],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const stdout = new TextDecoder().decode(output.stdout);
  assert.ok(output.success, new TextDecoder().decode(output.stderr));
  assert.match(stdout, /\d+ cores/);
  for (
    const path of [
      /\| runner run, \d+×32 B \| [\d.]+ \([\d.]+\) \| [\d.]+×/,
      /\| runner serve \+ SSE client/,
      /\| runner serve \+ NDJSON client/,
      /\| runner daemon → hub/,
      /\| runner run, one short cold prompt \|/,
      /\| runner --version \|/,
      /\| \d+ concurrent runs on runner serve \| .* (\d+)\/\1 completed/,
      /\| n8n stream, .*fast agent/,
      /\| n8n stream, .*slow agent/,
      /\| GET \/v1\/runs\?limit=50, 100000 vs 1000 runs stored, \d+ requests \| .* [\d.]+× \(target ≤ 2×\)/,
    ]
  ) {
    assert.match(stdout, path);
  }
});
