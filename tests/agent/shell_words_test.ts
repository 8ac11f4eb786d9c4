import assert from "node:assert/strict";
import { RunnerError } from "../../lib/errors.ts";
import { quoteCommand, splitCommand } from "../../lib/agent/shell_words.ts";

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

Deno.test("splitCommand handles quotes and escapes like Python's shlex.split", () => {
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
  // Inside double quotes only \\ and \" are escapes (shlex, unlike sh):
  // the backslash before $, a backtick or a newline stays.
  assert.deepEqual(splitCommand(`"\\\\ \\" \\$HOME \\\`x\\\` \\n"`), [
    '\\ " \\$HOME \\`x\\` \\n',
  ]);
  assert.deepEqual(splitCommand('"a\\$b"'), ["a\\$b"]);
  assert.deepEqual(splitCommand('"a\\`b"'), ["a\\`b"]);
  assert.deepEqual(splitCommand('"a\\\nb"'), ["a\\\nb"]);
  assert.deepEqual(splitCommand(`a\\ b c\\"d \\'e`), ["a b", 'c"d', "'e"]);
  // Outside quotes backslash-newline is a literal newline, not a continuation.
  assert.deepEqual(splitCommand("a \\\nb"), ["a", "\nb"]);
  // Form feed and vertical tab are not separators for shlex.
  assert.deepEqual(splitCommand("a\fb\vc d"), ["a\fb\vc", "d"]);
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

/** Whether `python3` runs here (the shlex oracle). */
function hasPython(): boolean {
  try {
    return new Deno.Command("python3", { args: ["-c", "import shlex"] })
      .outputSync().success;
  } catch {
    return false;
  }
}

/** Random command lines over the characters shlex treats specially. */
function randomCommandLines(count: number, seed: number): string[] {
  const alphabet = [
    "a",
    "b",
    "-",
    " ",
    "  ",
    "\t",
    "\n",
    "\r",
    "\f",
    "'",
    '"',
    "\\",
    "$",
    "`",
    "#",
    "é",
  ];
  let state = seed;
  const next = () => {
    // A fixed linear congruential generator, so a failure reproduces.
    state = (state * 1103515245 + 12345) % 2147483648;
    return state / 2147483648;
  };
  return Array.from({ length: count }, () => {
    const length = 1 + Math.floor(next() * 12);
    return Array.from(
      { length },
      () => alphabet[Math.floor(next() * alphabet.length)],
    ).join("");
  });
}

Deno.test({
  name: "splitCommand agrees with python3's shlex.split on 3000 random lines",
  ignore: !hasPython(),
  fn: async () => {
    const lines = randomCommandLines(3000, 13);
    const script = [
      "import json, shlex, sys",
      "out = []",
      "for line in json.load(sys.stdin):",
      "    try: out.append(shlex.split(line))",
      "    except ValueError: out.append(None)",
      "print(json.dumps(out))",
    ].join("\n");
    const child = new Deno.Command("python3", {
      args: ["-c", script],
      stdin: "piped",
      stdout: "piped",
    }).spawn();
    const writer = child.stdin.getWriter();
    await writer.write(new TextEncoder().encode(JSON.stringify(lines)));
    await writer.close();
    const expected: Array<string[] | null> = JSON.parse(
      new TextDecoder().decode((await child.output()).stdout),
    );
    const differences = lines.flatMap((line, index) => {
      let actual: string[] | null;
      try {
        actual = splitCommand(line);
      } catch {
        actual = null;
      }
      // shlex returns [] for a blank line; splitCommand refuses it.
      const want = expected[index]?.length === 0 ? null : expected[index];
      return JSON.stringify(actual) === JSON.stringify(want) ? [] : [
        `${JSON.stringify(line)}: ${JSON.stringify(actual)} != ${
          JSON.stringify(want)
        }`,
      ];
    });
    assert.deepEqual(differences, []);
  },
});
