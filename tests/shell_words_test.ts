import assert from "node:assert/strict";
import { RunnerError } from "../lib/errors.ts";
import { quoteCommand, splitCommand } from "../lib/agent/shell_words.ts";

/** Asks a real POSIX shell how it splits `commandLine` (used as the oracle). */
async function shellSplit(commandLine: string): Promise<string[]> {
  const output = await new Deno.Command("/bin/sh", {
    args: ["-c", `printf '%s\\0' ${commandLine}`],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(output.stdout);
  return text.split("\0").slice(0, -1);
}

Deno.test("splitCommand splits the preset commands on whitespace", () => {
  assert.deepEqual(splitCommand("npx -y @zed-industries/codex-acp"), [
    "npx",
    "-y",
    "@zed-industries/codex-acp",
  ]);
  assert.deepEqual(splitCommand("  opencode \t acp\n"), ["opencode", "acp"]);
});

Deno.test("splitCommand handles quotes and escapes like a POSIX shell", () => {
  assert.deepEqual(splitCommand(`agent --name 'a b' "c d"`), [
    "agent",
    "--name",
    "a b",
    "c d",
  ]);
  assert.deepEqual(splitCommand(`a'b'"c"d`), ["abcd"]);
  assert.deepEqual(splitCommand(`'' ""`), ["", ""]);
  assert.deepEqual(splitCommand(`'it''s' "no \\'escape\\' here"`), [
    "its",
    "no \\'escape\\' here",
  ]);
  assert.deepEqual(splitCommand(`"\\\\ \\" \\$HOME \\\`x\\\` \\n"`), [
    '\\ " $HOME `x` \\n',
  ]);
  assert.deepEqual(splitCommand(`a\\ b c\\"d \\'e`), ["a b", 'c"d', "'e"]);
  assert.deepEqual(splitCommand("a \\\nb"), ["a", "b"]);
  assert.deepEqual(splitCommand("run # not a comment"), [
    "run",
    "#",
    "not",
    "a",
    "comment",
  ]);
});

Deno.test("splitCommand agrees with /bin/sh on quoting", async () => {
  const samples = [
    `npx -y @agentclientprotocol/claude-agent-acp@0.62.0`,
    `agent --flag='a b' "c 'd' e" f\\ g`,
    `x"y z"'w'  "\\\\" "\\"" 'a\\b'`,
    `'' "" a`,
  ];
  for (const sample of samples) {
    assert.deepEqual(splitCommand(sample), await shellSplit(sample), sample);
  }
});

Deno.test("splitCommand rejects unclosed quotes and empty commands", () => {
  for (const bad of [`agent 'oops`, `agent "oops`, `agent "a\\"`, "agent \\"]) {
    assert.throws(() => splitCommand(bad), (error) => {
      assert.ok(error instanceof RunnerError);
      assert.equal(error.code, "config.invalid");
      return true;
    });
  }
  for (const empty of ["", "   ", "\n\t"]) {
    assert.throws(() => splitCommand(empty), (error) => {
      assert.ok(error instanceof RunnerError);
      assert.equal(error.code, "config.invalid");
      assert.match(error.message, /acp-command/);
      return true;
    });
  }
});

Deno.test("quoteCommand leaves safe words and quotes the rest", () => {
  assert.equal(
    quoteCommand(["npx", "-y", "@zed-industries/codex-acp"]),
    "npx -y @zed-industries/codex-acp",
  );
  assert.equal(
    quoteCommand(["echo", "a b", "", "it's"]),
    `echo 'a b' '' 'it'"'"'s'`,
  );
});

Deno.test("quoteCommand round-trips through /bin/sh and splitCommand", async () => {
  const argv = [
    "printf-me",
    "a b",
    "",
    "it's",
    `"double"`,
    "$HOME",
    "`id`",
    "semi;colon && rm -rf /",
    "back\\slash",
    "new\nline",
    "*",
    "ünïcødé",
  ];
  const line = quoteCommand(argv);
  assert.deepEqual(splitCommand(line), argv);
  assert.deepEqual(await shellSplit(line), argv);
});
