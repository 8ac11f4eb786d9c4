/**
 * `deno task bench --short` still works: every path runs and is reported.
 * (The bench measures; nothing here judges its numbers.)
 *
 * @module
 */

import assert from "node:assert/strict";
import { ROOT } from "../helpers.ts";

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
      /\| runner run, answer size .* \| ≤ 1\.20× \| (pass|miss) \|/,
      /\| GET \/v1\/runs\/:id\/events .* \| ≤ 2\.00× \| (pass|miss) \|/,
      /\| idle daemons on one hub .* KiB\/daemon.* \| (pass|miss) \|/,
      /\| \d+ vs \d+ concurrent runs on runner serve: p50 time to first delta \|/,
      /2nd message of a conversation.*\(target ≥ 10×: (pass|miss)\)/,
      /\| \/acp Streamable HTTP, SDK client, \d+×32 B \| [\d.]+ \([\d.]+\) \| [\d.]+×.* first update \d+ ms \(stdio \d+ ms/,
      /\| \/acp WebSocket, SDK client, \d+×32 B \| [\d.]+ \([\d.]+\) \| [\d.]+×/,
    ]
  ) {
    assert.match(stdout, path);
  }
});

Deno.test("deno task bench refuses an unknown --only group before measuring anything", async () => {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", `${ROOT}scripts/bench.ts`, "--only", "paths,nope"],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(output.code, 2);
  assert.match(
    new TextDecoder().decode(output.stderr),
    /unknown group nope in --only; groups: paths, sizes/,
  );
});
