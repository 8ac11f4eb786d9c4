/**
 * `runner run` asks the person at a terminal (a real pseudo-terminal made by
 * util-linux `script`) to answer the agent's permission request, and uses the
 * policy without a terminal.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { quoteCommand } from "../../lib/agent/shell_words.ts";
import { DENO_RUN_FLAGS } from "../../lib/runtime_permissions.ts";
import {
  customRunArgs,
  fixtureCommand,
  ROOT,
  runCli,
  tempDir,
} from "../helpers.ts";

interface TerminalRun {
  output: string;
  code: number;
}

/** Runs `runner run` on a pseudo-terminal, typing `typed` once the question shows. */
async function runOnTerminal(
  args: string[],
  typed: string,
): Promise<TerminalRun> {
  const command = quoteCommand([
    Deno.execPath(),
    "run",
    ...DENO_RUN_FLAGS,
    `${ROOT}main.ts`,
    "run",
    ...args,
  ]);
  const child = new Deno.Command("script", {
    args: ["-qfec", command, "/dev/null"],
    env: { NO_COLOR: "1", RUNNER_DATA_DIR: tempDir(), TERM: "dumb" },
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const writer = child.stdin.getWriter();
  const decoder = new TextDecoder();
  let output = "";
  let typedYet = false;
  for await (const chunk of child.stdout) {
    output += decoder.decode(chunk, { stream: true });
    if (!typedYet && output.includes("[N]ever: ")) {
      typedYet = true;
      await writer.write(new TextEncoder().encode(typed));
    }
  }
  await writer.close().catch(() => {});
  const status = await child.status;
  await child.stderr.cancel();
  return { output, code: status.code };
}

/**
 * `runner run custom` of the fixture agent with `fixtureFlags` on a
 * pseudo-terminal, in a fresh workspace, asked to "write the file" (then
 * `extra` arguments), typing `typed` at the question.
 */
function askOnTerminal(
  fixtureFlags: string[],
  typed: string,
  extra: string[] = [],
): Promise<TerminalRun> {
  return runOnTerminal([
    "custom",
    "--acp-command",
    fixtureCommand(...fixtureFlags),
    "--workspace",
    join(tempDir(), "ws"),
    ...extra,
    "write the file",
  ], typed);
}

Deno.test("runner run on a terminal asks, and 'y' lets the tool run once", async () => {
  const record = join(tempDir(), "record.jsonl");
  const result = await askOnTerminal(
    ["--permission", "--record", record],
    "y\n",
  );
  assert.match(
    result.output,
    /\[permission\] Write file \(edit\) on notes\.txt \{"path":"notes\.txt","content":"hello"\}/,
  );
  assert.match(
    result.output,
    /permission: allow_once\r?\necho: write the file/,
  );
  assert.equal(result.code, 0);
});

Deno.test("runner run on a terminal: 'N' never allows; a typo is asked again", async () => {
  const result = await askOnTerminal(["--permission"], "maybe\nN\n");
  const questions = result.output.split("[N]ever: ").length - 1;
  assert.equal(questions, 2);
  assert.match(result.output, /permission: reject_always/);
  assert.equal(result.code, 0);
});

Deno.test("runner run on a terminal: 'n', then an agent that ends the turn without text, is run.permission_rejected and exit 3", async () => {
  const result = await askOnTerminal(
    ["--permission", "--silent-on-reject"],
    "n\n",
  );
  assert.match(
    result.output,
    /error \[run\.permission_rejected\]: .*"Write file" was refused \(reject_once\)/,
  );
  assert.doesNotMatch(result.output, /login/);
  assert.equal(result.code, 3);
});

Deno.test("runner run on a terminal honours --permission-decision and asks nothing", async () => {
  const result = await askOnTerminal(["--permission"], "y\n", [
    "--permission-decision",
    "reject_once",
  ]);
  assert.ok(!result.output.includes("[N]ever"));
  assert.match(result.output, /permission: reject_once/);
});

Deno.test("runner run without a terminal uses the policy, and ask falls back", async () => {
  const dir = tempDir();
  const plain = await runCli(
    customRunArgs(fixtureCommand("--permission"), join(dir, "ws"), [
      "write the file",
    ]),
  );
  assert.equal(plain.code, 0);
  assert.match(plain.stdout, /^permission: allow_once\n/);
  const asked = await runCli(
    customRunArgs(fixtureCommand("--permission"), join(dir, "ws"), [
      "--permission-decision",
      "ask",
      "--permission-fallback",
      "reject_always",
      "write the file",
    ]),
  );
  assert.equal(asked.code, 0);
  assert.match(asked.stdout, /^permission: reject_always\n/);
});
