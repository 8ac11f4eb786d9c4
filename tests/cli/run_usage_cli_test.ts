/**
 * `runner run` and token usage: `--json` puts it on `run.completed`, and a
 * person at a terminal gets one usage line on stderr at the end (a pipe gets
 * none).
 *
 * @module
 */

import assert from "node:assert/strict";
import { DENO_RUN_FLAGS } from "../../lib/runtime_permissions.ts";
import {
  fixtureRunArgs,
  parseJsonLines,
  ROOT,
  runCli,
  tempDir,
} from "../helpers.ts";
import { fixtureTurnUsage } from "../usage_helpers.ts";

const USAGE_LINE =
  "[usage] 162 tokens (100 prompt, 20 completion, 30 cached read, 5 cached write, 7 thought); context 1000/200000; cost 0.25 USD";

Deno.test("runner run --json puts the usage on run.completed; a pipe gets no usage line", async () => {
  const result = await runCli(
    fixtureRunArgs(["--usage", "turn"], "--json", "hi"),
  );
  assert.equal(result.code, 0, result.stderr);
  const completed = parseJsonLines(result.stdout).at(-1)!;
  assert.equal(completed.type, "run.completed");
  assert.deepEqual(completed.usage, fixtureTurnUsage());
  assert.doesNotMatch(result.stderr, /\[usage\]/);
});

/** Runs `runner run` with stdout and stderr on a pseudo-terminal (`script`). */
async function onTerminal(args: string[]): Promise<string> {
  const quote = (word: string) => `'${word.replaceAll("'", `'\\''`)}'`;
  const command = [
    Deno.execPath(),
    "run",
    ...DENO_RUN_FLAGS,
    `${ROOT}main.ts`,
    ...args,
  ].map(quote).join(" ");
  const output = await new Deno.Command("script", {
    args: ["-qec", command, "/dev/null"],
    env: { NO_COLOR: "1", RUNNER_DATA_DIR: tempDir() },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(output.code, 0, new TextDecoder().decode(output.stderr));
  return new TextDecoder().decode(output.stdout).replaceAll("\r", "");
}

Deno.test("runner run on a terminal ends with one usage line on stderr; none when the agent reported nothing", async () => {
  const shown = await onTerminal(fixtureRunArgs(["--usage", "turn"], "hi"));
  const lines = shown.split("\n").filter((line) => line.startsWith("[usage]"));
  assert.deepEqual(lines, [USAGE_LINE], shown);
  assert.ok(shown.trimEnd().endsWith(USAGE_LINE), "at the end");

  const silent = await onTerminal(fixtureRunArgs([], "hi"));
  assert.doesNotMatch(silent, /\[usage\]/);
});
