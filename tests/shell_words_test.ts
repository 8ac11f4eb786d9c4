import { isDeepStrictEqual } from "node:util";
import { RunnerError } from "../lib/errors.ts";
import { quoteCommand, splitCommand } from "../lib/shell_words.ts";

function assertEquals(actual: unknown, expected: unknown, context = ""): void {
  if (!isDeepStrictEqual(actual, expected)) {
    throw new Error(
      `${context ? context + ": " : ""}expected ${
        JSON.stringify(expected)
      }, got ${JSON.stringify(actual)}`,
    );
  }
}

function assertThrows(fn: () => unknown): RunnerError {
  try {
    fn();
  } catch (error) {
    if (error instanceof RunnerError) return error;
    throw error;
  }
  throw new Error("expected a RunnerError");
}

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
  assertEquals(splitCommand("npx -y @zed-industries/codex-acp"), [
    "npx",
    "-y",
    "@zed-industries/codex-acp",
  ]);
  assertEquals(splitCommand("  opencode \t acp\n"), ["opencode", "acp"]);
});

Deno.test("splitCommand handles quotes and escapes like a POSIX shell", () => {
  assertEquals(splitCommand(`agent --name 'a b' "c d"`), [
    "agent",
    "--name",
    "a b",
    "c d",
  ]);
  assertEquals(splitCommand(`a'b'"c"d`), ["abcd"]);
  assertEquals(splitCommand(`'' ""`), ["", ""]);
  assertEquals(splitCommand(`'it''s' "no \\'escape\\' here"`), [
    "its",
    "no \\'escape\\' here",
  ]);
  assertEquals(splitCommand(`"\\\\ \\" \\$HOME \\\`x\\\` \\n"`), [
    '\\ " $HOME `x` \\n',
  ]);
  assertEquals(splitCommand(`a\\ b c\\"d \\'e`), ["a b", 'c"d', "'e"]);
  assertEquals(splitCommand("a \\\nb"), ["a", "b"]);
  assertEquals(splitCommand("run # not a comment"), [
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
    assertEquals(splitCommand(sample), await shellSplit(sample), sample);
  }
});

Deno.test("splitCommand rejects unclosed quotes and empty commands", () => {
  for (const bad of [`agent 'oops`, `agent "oops`, `agent "a\\"`, "agent \\"]) {
    const error = assertThrows(() => splitCommand(bad));
    assertEquals(error.code, "config.invalid");
  }
  for (const empty of ["", "   ", "\n\t"]) {
    const error = assertThrows(() => splitCommand(empty));
    assertEquals(error.code, "config.invalid");
    assertEquals(error.message.includes("acp-command"), true);
  }
});

Deno.test("quoteCommand leaves safe words and quotes the rest", () => {
  assertEquals(
    quoteCommand(["npx", "-y", "@zed-industries/codex-acp"]),
    "npx -y @zed-industries/codex-acp",
  );
  assertEquals(
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
  assertEquals(splitCommand(line), argv);
  assertEquals(await shellSplit(line), argv);
});
