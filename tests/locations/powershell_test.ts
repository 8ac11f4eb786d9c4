/**
 * `remote-shell=powershell`: the wrapper script's quoting, checked against a
 * table of hostile workspaces and commands. No PowerShell can be installed on
 * this machine (none in npm or Debian), so the script is read back with a
 * tokenizer written from the PowerShell language specification's rules for
 * verbatim (single-quoted) strings — the only kind of literal the wrapper
 * emits — and the ssh command line is decoded back from `-EncodedCommand`.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { parseRunConfig } from "../../lib/config.ts";
import { RunnerError } from "../../lib/errors.ts";
import {
  checkPowerShellArgv,
  powerShellCommandLine,
  powerShellKillScript,
  powerShellWrapper,
  quotePowerShell,
} from "../../lib/locations/powershell.ts";
import { assertFailedWith, runToEnd } from "../engine_helpers.ts";
import { fixtureCommand, readRecord, tempDir } from "../helpers.ts";
import { sshRunTest, sshTargetConfig } from "../ssh_helpers.ts";

/**
 * PowerShell's single-quote characters (language spec §2.3.5.2.2,
 * `single-quote-character`): the ASCII apostrophe and U+2018–U+201B.
 */
const QUOTE_CHARS = new Set(["'", "\u2018", "\u2019", "\u201A", "\u201B"]);

/** A script as PowerShell's tokenizer sees it: code between verbatim strings. */
interface Tokenized {
  /** The code, with each verbatim string replaced by `<S>`. */
  skeleton: string;
  /** The values of the verbatim strings, in order. */
  values: string[];
}

/**
 * Splits `script` into code and verbatim-string values. Inside a string, two
 * quote characters in a row stand for the second one; a lone one ends it.
 * Code outside strings must not hold what would start another kind of
 * literal or a comment (`"`, `` ` ``, `#`, `@'`), so this reading is exact.
 */
function tokenize(script: string): Tokenized {
  const chars = [...script];
  let skeleton = "";
  const values: string[] = [];
  for (let i = 0; i < chars.length; i++) {
    const c = chars[i];
    if (!QUOTE_CHARS.has(c)) {
      assert.ok(
        !['"', "`", "#"].includes(c) &&
          !(c === "@" && QUOTE_CHARS.has(chars[i + 1] ?? "")),
        `code outside strings holds ${JSON.stringify(c)} at ${i}`,
      );
      skeleton += c;
      continue;
    }
    let value = "";
    for (i++;; i++) {
      assert.ok(i < chars.length, "unterminated verbatim string");
      if (QUOTE_CHARS.has(chars[i])) {
        if (!QUOTE_CHARS.has(chars[i + 1] ?? "")) break;
        i++;
      }
      value += chars[i];
    }
    values.push(value);
    skeleton += "<S>";
  }
  return { skeleton, values };
}

function decodeEncodedCommand(line: string): string {
  const match = line.match(
    /^powershell -NoProfile -NonInteractive -EncodedCommand ([A-Za-z0-9+/=]+)$/,
  );
  assert.ok(match, `unexpected command line: ${line.slice(0, 80)}`);
  const bytes = Uint8Array.from(atob(match[1]), (c) => c.charCodeAt(0));
  return new TextDecoder("utf-16le").decode(bytes);
}

const HOSTILE_WORKSPACES = [
  "C:\\Users\\me\\work space",
  "C:\\Users\\me\\it's",
  "C:\\w\\''double''",
  "C:\\w\\$env:USERPROFILE\\$(Remove-Item -Recurse C:\\)",
  "C:\\w\\`n`$x back`tick`",
  "C:\\w\\a; Stop-Computer; 'b",
  'C:\\w\\"quoted" & echo %PATH% | more > nul',
  "C:\\w\\\u2018smart\u2019 \u201Aquotes\u201B",
  "C:\\w\\ünïcödé 日本語 😀",
  "~\\projects\\x y",
  "~/projects/$(calc)",
  "\\\\server\\share\\dir with spaces\\",
  "C:\\w\\line\nbreak",
];

const HOSTILE_COMMANDS: string[][] = [
  ["npx", "-y", "@agentclientprotocol/claude-agent-acp@0.62.0"],
  ["C:\\Program Files\\Agent\\agent.exe", "--acp"],
  ["agent", "it's", "$HOME", "$(whoami)", "`whoami`", "a;b", "x|y", "&z"],
  ["agent", "\u2019; Remove-Item C:\\ -Recurse; \u2018", "'", "''", "\u201B"],
  ["agent", "--name=ünïcödé", "日本語", "😀", "tab\there"],
  ["agent", "@'", "'@", "--% verbatim", "-Command", "exit 1"],
  ["agent", "line\nbreak", "C:\\dir\\"],
];

Deno.test("quotePowerShell doubles every PowerShell quote character and nothing else", () => {
  assert.equal(quotePowerShell(""), "''");
  assert.equal(quotePowerShell("a b"), "'a b'");
  assert.equal(quotePowerShell("it's"), "'it''s'");
  assert.equal(
    quotePowerShell("\u2018x\u2019\u201Ay\u201B"),
    "'\u2018\u2018x\u2019\u2019\u201A\u201Ay\u201B\u201B'",
  );
  assert.equal(quotePowerShell('$a `b "c" #d'), "'$a `b \"c\" #d'");
  for (const text of [...HOSTILE_WORKSPACES, ...HOSTILE_COMMANDS.flat()]) {
    assert.deepEqual(tokenize(quotePowerShell(text)), {
      skeleton: "<S>",
      values: [text],
    });
  }
});

Deno.test("the PowerShell wrapper keeps hostile workspaces and commands inside their string literals", () => {
  for (const workspace of HOSTILE_WORKSPACES) {
    for (const argv of HOSTILE_COMMANDS) {
      // The same script with harmless values of the same shape.
      const plainArgv = argv.map((_, index) => `ARG${index}`);
      const plain = tokenize(
        powerShellWrapper("WORKSPACE", { argv: plainArgv }),
      );
      const line = powerShellCommandLine(
        powerShellWrapper(workspace, { argv }),
      );
      const script = decodeEncodedCommand(line);
      assert.equal(script, powerShellWrapper(workspace, { argv }));
      const hostile = tokenize(script);
      const where = `${JSON.stringify(workspace)} ${JSON.stringify(argv)}`;
      // The code between the literals is exactly the plain script's ...
      assert.equal(hostile.skeleton, plain.skeleton, where);
      // ... and each literal holds exactly its value.
      const expected = plain.values.map((value) =>
        value === "WORKSPACE"
          ? workspace
          : /^ARG\d+$/.test(value)
          ? argv[Number(value.slice(3))]
          : value
      );
      assert.deepEqual(hostile.values, expected, where);
    }
  }
  // The agent runs as `& 'program' 'arg' …` after env-json is read.
  const { skeleton } = tokenize(
    powerShellWrapper("C:\\w", { argv: ["a", "b"] }),
  );
  assert.match(skeleton, /\n& <S> <S>\nexit \$LASTEXITCODE$/);
  assert.match(skeleton, /\$workspace = <S>\n/);
  assert.match(skeleton, /Set-Location -LiteralPath \$workspace/);
});

Deno.test("for a preset the PowerShell wrapper runs the agent's own executable when the remote PATH has it, else the fallback, both quoted", () => {
  for (const workspace of HOSTILE_WORKSPACES) {
    for (const argv of HOSTILE_COMMANDS) {
      const choices = { executable: argv, fallback: ["npx", "-y", ...argv] };
      const script = decodeEncodedCommand(
        powerShellCommandLine(powerShellWrapper(workspace, { argv, choices })),
      );
      const { skeleton, values } = tokenize(script);
      const where = `${JSON.stringify(workspace)} ${JSON.stringify(argv)}`;
      const run = (words: string[]) => `& ${words.map(() => "<S>").join(" ")}`;
      assert.ok(
        skeleton.endsWith(
          "\nif (Get-Command -Name <S> -CommandType Application -ErrorAction SilentlyContinue) {\n" +
            `  ${run(argv)}\n} else {\n  ${run(choices.fallback)}\n}\n` +
            "exit $LASTEXITCODE",
        ),
        where,
      );
      assert.deepEqual(
        values.slice(-(1 + argv.length + choices.fallback.length)),
        [argv[0], ...argv, ...choices.fallback],
        where,
      );
    }
  }
});

Deno.test("the ssh command line is base64 only: nothing of the config reaches a shell or a command line as text", () => {
  const line = powerShellCommandLine(
    powerShellWrapper("C:\\w\\a b", {
      argv: ["agent", "--x", "SECRET-LIKE-ARG"],
    }),
  );
  assert.match(
    line,
    /^powershell -NoProfile -NonInteractive -EncodedCommand [A-Za-z0-9+/=]+$/,
  );
  assert.ok(!line.includes("SECRET-LIKE-ARG"));
  const long = Array.from({ length: 2000 }, (_, i) => `--flag-${i}`);
  assert.throws(
    () =>
      powerShellCommandLine(
        powerShellWrapper("C:\\w", { argv: ["agent", ...long] }),
      ),
    (error) =>
      error instanceof RunnerError && error.code === "config.invalid" &&
      /over the 8191 Windows accepts/.test(error.message),
  );
});

Deno.test("arguments PowerShell cannot pass intact to a Windows program are refused up front", () => {
  for (
    const argv of [["agent", ""], ["agent", 'say "hi"'], [
      "agent",
      "C:\\my dir\\",
    ]]
  ) {
    assert.throws(
      () => checkPowerShellArgv(argv),
      (error) =>
        error instanceof RunnerError && error.code === "config.invalid" &&
        error.message.startsWith("acp-command: word 2 "),
    );
  }
  for (const argv of HOSTILE_COMMANDS.filter((a) => !a.includes("C:\\dir\\"))) {
    checkPowerShellArgv(argv);
  }
});

Deno.test("the PowerShell teardown script names only a process id", () => {
  const script = powerShellKillScript(4242);
  assert.match(script, /ProcessId = 4242'/);
  assert.match(script, /Stop-Process -Id \$id -Force/);
  for (const bad of [0, -1, 1.5, Number.NaN]) {
    assert.throws(() => powerShellKillScript(bad), RangeError);
  }
});

Deno.test("Windows workspace paths are accepted for remote-shell=powershell only", () => {
  const base = {
    provider: "custom",
    "acp-command": "agent",
    location: "remote-ssh",
    "ssh-target": "me@win",
  };
  for (
    const workspace of ["C:\\Users\\me\\w", "D:/w", "\\\\srv\\share\\w", "~\\w"]
  ) {
    const config = parseRunConfig({
      ...base,
      "remote-shell": "powershell",
      workspace,
    });
    assert.equal(config.workspace, workspace);
    assert.throws(
      () => parseRunConfig({ ...base, workspace }),
      /workspace: must be an absolute path/,
    );
  }
  assert.throws(
    () =>
      parseRunConfig({ ...base, "remote-shell": "powershell", workspace: "w" }),
    /workspace: must be an absolute path/,
  );
});

sshRunTest(
  "remote-shell=powershell over a real sshd without PowerShell: the run fails with ssh's stderr, env-json never on a command line",
  async ({ sshd, h }) => {
    const record = join(tempDir(), "record.jsonl");
    const config = parseRunConfig({
      provider: "custom",
      location: "remote-ssh",
      "remote-shell": "powershell",
      "acp-command": fixtureCommand("--record", record),
      workspace: "C:\\runner\\w",
      ...sshTargetConfig(sshd),
      "env-json": { PS_SECRET: "ps-secret-value" },
      "langbot-assets-enabled": false,
    });
    const { log } = await runToEnd(h.manager, {
      input: { text: "hi" },
      config,
    });
    const failed = assertFailedWith(log, "acp.process_exited");
    assert.match(
      String(failed.data.stderr_tail),
      /powershell: (command )?not found/,
    );
    assert.ok(!JSON.stringify(log.events).includes("ps-secret-value"));
    assert.deepEqual(readRecord(record), []);
  },
);
