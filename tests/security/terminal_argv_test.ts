/**
 * Argv smuggling against the terminal permission rules: a rule matches the
 * program, its arguments as a list and the variables the command sets, behind
 * the wrappers the runner can read — never a line of text. Every example of
 * `docs/permissions.md`, "Terminal rules" (read from the page) and more bypass
 * attempts, on the matcher and end to end through `runner run`, a caller's
 * run on `runner serve` and a hub's job on `runner daemon`, with client
 * terminals and the fixture agent's `--terminal` (`argv_checks.ts`): no
 * bypass runs (no `pwned` file appears).
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { splitCommand } from "../../lib/agent/shell_words.ts";
import { parseRunConfig, type PermissionRule } from "../../lib/config.ts";
import { RunnerError } from "../../lib/errors.ts";
import { matchRule } from "../../lib/run/permission_rules.ts";
import type { RunEvent } from "../../lib/events.ts";
import {
  agentCommand,
  customRunArgs,
  parseJsonLines,
  runCli,
  tempDir,
} from "../helpers.ts";
import {
  AGENT_PATH,
  assertSmugglingHeld,
  docsExamples,
  ruleDeciding,
  smugglingAttack,
  smugglingFlags,
  smugglingOperatorFlags,
  workspace,
} from "./argv_checks.ts";
import { attackDaemon, attackServe, callerRun } from "./entrances.ts";

/** A shell-quoted line, `NAME=value` words first, as `terminal/create` params. */
function request(line: string) {
  const words = splitCommand(line);
  const env: { name: string; value: string }[] = [];
  while (/^[A-Za-z_][A-Za-z0-9_%]*=/.test(words[0])) {
    const word = words.shift()!;
    const at = word.indexOf("=");
    env.push({ name: word.slice(0, at), value: word.slice(at + 1) });
  }
  const [command, ...args] = words;
  return { sessionId: "s", command, args, env };
}

/** The index of the rule deciding `line` (-1: none, `permission-decision`). */
function decidingRule(
  rules: PermissionRule[],
  line: string,
  cwd: string,
  agentPath = AGENT_PATH,
): number {
  return ruleDeciding(rules, request(line), { cwd, agentPath })?.index ?? -1;
}

/** Fails unless each `[line, rule index]` case is decided by that rule of `rules`. */
function assertDecidedBy(
  rules: PermissionRule[],
  cases: [string, number][],
  cwd: string,
): void {
  assert.deepEqual(
    cases.map(([line]) => [line, decidingRule(rules, line, cwd)]),
    cases,
  );
}

Deno.test("docs/permissions.md: every Terminal rules example is decided by the rule the page says", () => {
  const { rules, cases } = docsExamples();
  const cwd = workspace();
  const wrong = cases
    .map((c) => ({ ...c, got: decidingRule(rules, c.line, cwd) }))
    .filter((c) => c.got !== c.rule);
  assert.deepEqual(wrong, []);
});

/** Bypass attempts beyond the page's, against its rules: each must reach the last rule (`ask`), or the one named. */
const MORE_ATTEMPTS: { line: string; rule?: number }[] = [
  { line: "env -u PATH git status" },
  { line: "env -S 'git status'" },
  { line: "env -C /tmp git status" },
  { line: "env -C/ git status" },
  { line: "env --chdir=/ git status" },
  { line: "./env git status" },
  { line: "sh -lc 'git status'" },
  { line: "bash --rcfile evil -c 'git status'" },
  { line: "bash -O extglob -c 'git status'" },
  { line: "sh -c 'git status &'" },
  { line: "sh -c 'git status | sh'" },
  { line: "sh -c 'git status && id > pwned'" },
  { line: "sh -c 'git log --oneline; id > pwned'" },
  { line: "sh -c 'git log --oneline $(id > pwned)'" },
  { line: "sh -c 'git log --oneline `id > pwned`'" },
  { line: "sh -c 'git log --oneline > pwned'" },
  { line: `sh -c 'git log --oneline "$(id > pwned)"'` },
  { line: "sh -c 'git log --oneline & id > pwned'" },
  { line: "sh -c 'git status\nid > pwned'" },
  { line: "sh -c 'git st*'" },
  { line: "sh -c 'git status #'" },
  { line: "sh -c '~/git status'" },
  { line: "sh -c 'eval git status'" },
  { line: "sh -c '. ./evil'" },
  { line: "sh -c 'command -p git status'" },
  { line: "sh -c 'exec -a git ./git status'" },
  { line: "sh -c 'PATH=./bin git status'" },
  { line: "sh -c 'GIT_DIR=x git status'" },
  { line: "sh -c 'git status' -c 'id > pwned'", rule: 0 },
  { line: "sh -c 'exec git status'", rule: 0 },
  { line: `sh -c '"git" st"a"tus'`, rule: 0 },
  { line: "timeout --kill-after=1 5 git status", rule: 0 },
  { line: "/usr/bin/env -- git status", rule: 0 },
  { line: "timeout 5" },
  { line: "nohup --foo git status" },
  { line: "xargs -I{} git status {}" },
  { line: "xargs -a list git log --oneline" },
  { line: `node -e 'require("child_process").execSync("git status")'` },
  { line: `perl -e 'system "git status"'` },
  { line: `python3 -Bc 'import os; os.system("git status")'` },
  { line: "GIT_CONFIG_PARAMETERS=x git status" },
  { line: "BASH_FUNC_git%%='() { id > pwned; }' bash -c 'git status'" },
  { line: "PATH=./bin sh -c 'git diff'" },
  { line: "env PATH=./bin git diff" },
  { line: "env -i PATH=./bin git diff" },
  { line: "git 'log --oneline' x" },
  { line: "git log '--oneline -p'" },
];

Deno.test("more bypass attempts: wrappers with options the runner does not read, scripts beyond one command, inline code and variables match no allowing rule", () => {
  const { rules } = docsExamples();
  const cwd = workspace();
  const last = rules.length - 1;
  const wrong = MORE_ATTEMPTS
    .map((attempt) => ({
      line: attempt.line,
      want: attempt.rule ?? last,
      got: decidingRule(rules, attempt.line, cwd),
    }))
    .filter((c) => c.got !== c.want);
  assert.deepEqual(wrong, []);
});

Deno.test("a glob matches within one argument, never across two; ... takes the rest; a variable is never an argument", () => {
  const cwd = workspace();
  const rules: PermissionRule[] = [
    { command: ["cat", "*"], decision: "allow" },
    { command: ["ls", "**"], decision: "allow" },
    { command: ["echo", "..."], env: { LANG: "C*" }, decision: "allow" },
  ];
  const cases: [string, number][] = [
    ["cat a.txt", 0],
    ["cat 'a b.txt'", 0],
    ["cat a.txt b.txt", -1],
    ["cat ../secret", -1],
    ["cat", -1],
    ["ls /etc/x", 1],
    ["ls a b", -1],
    ["echo", 2],
    ["echo a b c", 2],
    ["LANG=C.UTF-8 echo hi", 2],
    ["LANG=fr echo hi", -1],
    ["LC_ALL=C echo hi", -1],
    ["env LANG=C.UTF-8 echo hi", 2],
  ];
  assertDecidedBy(rules, cases, cwd);
});

Deno.test("a program is the file its name finds on the agent's PATH, called by that name; a path rule matches the path and its real path", () => {
  const cwd = workspace();
  Deno.symlinkSync("/usr/bin/git", join(cwd, "ls"));
  Deno.symlinkSync("/usr/bin", join(cwd, "usrbin"));
  const rules: PermissionRule[] = [
    { command: ["git", "status"], decision: "allow" },
    { command: ["/usr/bin/g*", "version"], decision: "allow" },
  ];
  const cases: [string, number][] = [
    ["git status", 0],
    ["/usr/bin/git status", 0],
    ["./git status", -1],
    ["./ls status", -1],
    ["./usrbin/git status", 0],
    ["git version", 1],
    ["./usrbin/git version", -1],
    ["/usr/bin/../bin/git version", 1],
  ];
  assertDecidedBy(rules, cases, cwd);
});

Deno.test("a rule that rejects or asks matches every layer and whatever the command sets; the older title form still rejects by line", () => {
  const cwd = workspace();
  const rules: PermissionRule[] = [
    { command: ["nice", "..."], decision: "reject" },
    { title: "touch *", decision: "reject" },
    { command: ["rm", "..."], decision: "ask" },
    { kind: "execute", decision: "allow" },
  ];
  const cases: [string, number][] = [
    ["nice make", 0],
    ["env nice -n 3 git status", 0],
    ["touch x", 1],
    ["FOO=1 touch x", 1],
    ["/usr/bin/touch x", 1],
    ["sh -c 'touch x'", 1],
    ["touch a b", 1],
    ["FOO=1 rm -rf x", 2],
    ["timeout 5 rm x", 2],
    ["git status", 3],
  ];
  assertDecidedBy(rules, cases, cwd);
});

Deno.test("an interpreter's inline code is never matched, even by a rule that allows the interpreter with any arguments", () => {
  const cwd = workspace();
  const rules: PermissionRule[] = [
    { command: ["python3", "..."], decision: "allow" },
    { command: ["node", "..."], decision: "allow" },
    { command: ["perl", "..."], decision: "allow" },
  ];
  const cases: [string, number][] = [
    ["python3 build.py", 0],
    ["python3 -c 'print(1)'", -1],
    ["python3 -Ic 'print(1)'", -1],
    ["python3 -m http.server", 0],
    ["node app.js", 1],
    ["node -e 1", -1],
    ["node --eval=1", -1],
    ["node --import=data:text/javascript,1 app.js", -1],
    ["perl script.pl", 2],
    ["perl -le 'print 1'", -1],
    ["perl -MPOSIX script.pl", -1],
    ["env python3 -c 1", -1],
    ["sh -c 'python3 -c 1'", -1],
  ];
  assertDecidedBy(rules, cases, cwd);
});

Deno.test("in a script, a shell's own builtins are not the programs of the same name on PATH", () => {
  const cwd = workspace();
  // Some systems ship /usr/bin/cd, /usr/bin/command, …; here an `eval`.
  Deno.mkdirSync(join(cwd, "builtins"));
  Deno.writeTextFileSync(join(cwd, "builtins", "eval"), "#!/bin/sh\n");
  Deno.chmodSync(join(cwd, "builtins", "eval"), 0o755);
  const agentPath = `${cwd}/builtins:${AGENT_PATH}`;
  const rules: PermissionRule[] = [
    { command: ["eval", "..."], decision: "allow" },
  ];
  assert.equal(decidingRule(rules, "eval x", cwd, agentPath), 0);
  assert.equal(
    decidingRule(rules, `sh -c 'eval "id > pwned"'`, cwd, agentPath),
    -1,
  );
});

Deno.test("a command rule never matches a tool call's request; a title rule still matches a tool call's title", () => {
  const rules: PermissionRule[] = [
    { command: ["git", "status"], decision: "allow" },
    { title: "git status", decision: "ask" },
  ];
  const match = matchRule(rules, {
    kind: "execute",
    title: "git status",
    paths: [],
  }, "/");
  assert.equal(match?.index, 1);
  // A write's title is built by the runner from the real relative path: a
  // title glob's `*` cannot reach into another directory.
  const writes: PermissionRule[] = [
    { kind: "edit", title: "fs/write_text_file *.md", decision: "allow" },
  ];
  const write = (path: string) =>
    matchRule(writes, {
      kind: "edit",
      title: `fs/write_text_file ${path}`,
      paths: [path],
    }, "/ws")?.index ?? -1;
  assert.deepEqual(
    ["notes.md", "secrets/key.md", "a.md b/c.md"].map(write),
    [0, -1, -1],
  );
});

Deno.test("config: rules that cannot mean one thing are refused with config.invalid saying how to write them", () => {
  const refused = (rules: unknown[]) => {
    try {
      parseRunConfig({
        provider: "custom",
        "permission-rules-json": JSON.stringify(rules),
      });
    } catch (error) {
      assert.ok(error instanceof RunnerError);
      assert.equal(error.code, "config.invalid");
      return error.message;
    }
    assert.fail(`accepted ${JSON.stringify(rules)}`);
  };
  assert.match(
    refused([{ env: { PATH: "**" }, decision: "allow" }]),
    /^permission-rules-json: 0: env belongs to a command rule: write \{"command"/,
  );
  assert.match(
    refused([{ command: ["git"], title: "git", decision: "allow" }]),
    /command or title, not both/,
  );
  assert.match(
    refused([{ kind: "read", command: ["cat"], decision: "allow" }]),
    /kind execute/,
  );
  assert.match(
    refused([{ command: ["git", "...", "x"], decision: "allow" }]),
    /"\.\.\." \(any further arguments\) may only come last/,
  );
  assert.match(
    refused([{ command: ["..."], decision: "allow" }]),
    /must start with the program/,
  );
  assert.match(
    refused([{ command: [], decision: "allow" }]),
    /command must name a program/,
  );
  const config = parseRunConfig({
    provider: "custom",
    workspace: tempDir(),
    "permission-rules-json": JSON.stringify(docsExamples().rules),
  });
  assert.equal(config.permissionRulesJson.length, 6);
});

Deno.test("runner run: the argv smuggling bypasses of the docs' rules never start (no pwned file); the allowed commands run", async () => {
  const dir = workspace();
  const attack = smugglingAttack(dir);
  const result = await runCli(
    customRunArgs(agentCommand(smugglingFlags(attack)), dir, [
      ...smugglingOperatorFlags(attack),
      "--langbot-assets-enabled",
      "false",
      "--json",
      "go",
    ]),
  );
  assert.equal(result.code, 0, result.stderr);
  assertSmugglingHeld(
    dir,
    parseJsonLines(result.stdout) as unknown as RunEvent[],
  );
});

Deno.test("runner serve: a caller's agent smuggling argv past the operator's docs rules starts none of it (no pwned file); the allowed commands run", async () => {
  const dir = workspace();
  const attack = smugglingAttack(dir);
  const serve = await attackServe({ args: smugglingOperatorFlags(attack) });
  try {
    const events = await callerRun(serve, {
      provider: "custom",
      "acp-command": agentCommand(smugglingFlags(attack)),
      workspace: dir,
    });
    assert.equal(events.at(-1)?.type, "run.completed");
    assertSmugglingHeld(dir, events);
  } finally {
    await serve.stop();
  }
});

Deno.test("runner daemon: a hub job's agent smuggling argv past the hub operator's docs rules starts none of it (no pwned file); the allowed commands run", async () => {
  const dir = workspace();
  const attack = smugglingAttack(dir);
  const daemon = await attackDaemon({
    hubArgs: smugglingOperatorFlags(attack),
    daemonArgs: ["--client-terminals", "true"],
  });
  try {
    const events = await daemon.run({
      provider: "custom",
      "acp-command": agentCommand(smugglingFlags(attack)),
      workspace: dir,
    });
    assert.equal(events.at(-1)?.type, "run.completed");
    assertSmugglingHeld(dir, events);
  } finally {
    assert.equal(await daemon.stop(), 0, daemon.logs());
  }
});
