import assert from "node:assert/strict";

import { fixtureRunArgs, runCli, spawnCli } from "../helpers.ts";
import { readUntilText } from "../stream_helpers.ts";

Deno.test("a failure after unfinished text ends the stdout line before the error", async () => {
  const result = await runCli(fixtureRunArgs(["--exit-mid-prompt"], "hi"));
  assert.equal(result.code, 1);
  assert.equal(result.stdout, "partial\n");
  assert.match(result.stderr, /^error \[acp\.process_exited\]: /m);
});

/**
 * Starts a stalled run, waits for its text, signals it; returns what it
 * printed. The text ends with a character no run token has: the streaming
 * redactor holds back a tail that could begin a secret until the next chunk,
 * and a stalled agent sends none.
 */
async function signalRun(signal: Deno.Signal) {
  const child = spawnCli(
    fixtureRunArgs(["--text", "held.", "--stall-prompt"], "hi"),
  );
  const stderr = new Response(child.stderr).text();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let stdout = await readUntilText(reader, "held.");
  child.kill(signal);
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    stdout += value;
  }
  const status = await child.status;
  return { code: status.code, stdout, stderr: await stderr };
}

Deno.test("runner run cancelled by SIGTERM exits 143, by SIGINT 130", async (t) => {
  for (const [signal, code] of [["SIGTERM", 143], ["SIGINT", 130]] as const) {
    await t.step(signal, async () => {
      const result = await signalRun(signal);
      assert.equal(result.code, code, result.stderr);
      assert.equal(result.stdout, "held.\n");
      assert.match(result.stderr, /^error \[run\.cancelled\]: /m);
    });
  }
});
