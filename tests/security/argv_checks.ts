/**
 * Argv smuggling against the terminal permission rules as every entrance
 * tries it: the docs' example rules (read from `docs/permissions.md`,
 * "Terminal rules"), a workspace with a fake `git` and `env` that would each
 * make a `pwned` file, the client terminals an attacker agent asks for
 * (bypasses of the rules and the allowed baseline) and what must hold
 * afterwards (no `pwned` file, each call decided by the rule it should be).
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import type { PermissionRule } from "../../lib/config.ts";
import type { CreateTerminalRequest } from "@agentclientprotocol/sdk";
import type { RunEvent } from "../../lib/events.ts";
import { matchRule, type RuleMatch } from "../../lib/run/permission_rules.ts";
import { checkCommand } from "../../lib/run/terminal_command.ts";
import { ROOT, tempDir } from "../helpers.ts";
import { replyOf, terminalReports } from "./entrances.ts";

/** The `PATH` the agent (and so its terminal commands) gets. */
export const AGENT_PATH = Deno.env.get("PATH") ??
  "/usr/local/bin:/usr/bin:/bin";

/** The docs' example rules and their table of commands, read from the page. */
export function docsExamples(): {
  rules: PermissionRule[];
  cases: { line: string; rule: number }[];
} {
  const page = Deno.readTextFileSync(join(ROOT, "docs", "permissions.md"));
  const section = page.slice(page.indexOf("### Terminal rules"));
  const json = /```json\n([\s\S]*?)```/.exec(section);
  assert.ok(json, "the Terminal rules section has its rules");
  const cases = [...section.matchAll(/^\| `(.+)` +\| rule (\d+) +\|$/gm)]
    .map((row) => ({ line: row[1], rule: Number(row[2]) }));
  assert.ok(cases.length >= 20, `${cases.length} example commands`);
  return { rules: JSON.parse(json[1]), cases };
}

/** A workspace with a fake `git` and `env` (each would make `pwned`). */
export function workspace(): string {
  const dir = tempDir();
  for (const name of ["git", "env"]) {
    Deno.writeTextFileSync(join(dir, name), "#!/bin/sh\nid > pwned\n");
    Deno.chmodSync(join(dir, name), 0o755);
  }
  Deno.mkdirSync(join(dir, "bin"));
  Deno.copyFileSync(join(dir, "git"), join(dir, "bin", "git"));
  return dir;
}

/** The attacker's terminals and the operator's rules of one smuggling attack in `dir` (a {@linkcode workspace}). */
export function smugglingAttack(dir: string): {
  calls: { command: string; args: string[]; env?: Record<string, string> }[];
  rules: PermissionRule[];
} {
  const { rules } = docsExamples();
  new Deno.Command("git", { args: ["init", "-q", dir] }).outputSync();
  Deno.mkdirSync(join(dir, "keep"));
  const fsmonitor = [
    { name: "GIT_CONFIG_COUNT", value: "1" },
    { name: "GIT_CONFIG_KEY_0", value: "core.fsmonitor" },
    { name: "GIT_CONFIG_VALUE_0", value: "id > pwned; false" },
  ];
  const asEnv = (entries: { name: string; value: string }[]) =>
    Object.fromEntries(entries.map((e) => [e.name, e.value]));
  const calls = [
    // Allowed: the baseline that shows the rules do allow.
    { command: "git", args: ["status", "--short"] },
    { command: "git", args: ["status"] },
    // The attack on the old `PATH=** git status`, here `git diff`.
    {
      command: "sh",
      args: ["-c", "id > pwned; echo", "git", "diff"],
      env: { PATH: `${dir}/bin:${AGENT_PATH}` },
    },
    { command: "git", args: ["status"], env: asEnv(fsmonitor) },
    {
      command: "env",
      args: [...fsmonitor.map((e) => `${e.name}=${e.value}`), "git", "status"],
    },
    { command: "sh", args: ["-c", "git status; id > pwned"] },
    { command: "sh", args: ["-c", "git log --oneline -1; id > pwned"] },
    { command: "sh", args: ["-c", "git $(id > pwned) status"] },
    { command: "./env", args: ["git", "status"] },
    { command: "./git", args: ["status"] },
    {
      command: "env",
      args: ["git", "diff"],
      env: { PATH: `${dir}/bin:${AGENT_PATH}` },
    },
    {
      command: "python3",
      args: ["-c", "import os; os.system('id > pwned')"],
    },
    { command: "nice", args: ["rm", "-rf", "keep"] },
    { command: "git", args: ["log", "--oneline", "-1"] },
  ];
  return {
    calls,
    // The page's rules without the last (ask): nobody answers here; and
    // python3 with any arguments, which never covers inline code.
    rules: [
      ...rules.slice(0, -1),
      { command: ["python3", "..."], decision: "allow" },
    ],
  };
}

/** The fixture flags that ask for the attack's terminals. */
export function smugglingFlags(
  attack: ReturnType<typeof smugglingAttack>,
): string[] {
  return attack.calls.flatMap((call) => ["--terminal", JSON.stringify(call)]);
}

/** Asserts nothing the attacker smuggled ran in `dir`, and each call was decided by the rule it should be. */
export function assertSmugglingHeld(dir: string, events: RunEvent[]): void {
  const reports = terminalReports(replyOf(events));
  // What an attacker sees first: nothing of theirs ran.
  const left = [...Deno.readDirSync(dir)].map((entry) => entry.name);
  assert.deepEqual(left.filter((name) => name.startsWith("pwned")), []);
  assert.ok(left.includes("keep"), "nice rm -rf keep was rejected");
  const decided = events.filter((e) => e.type === "permission.decided")
    .map((e) => [e.data.decision, e.data.rule]);
  assert.deepEqual(decided, [
    ["reject_once", "default"],
    ["allow_once", 0],
    ["reject_once", "default"],
    ["reject_once", "default"],
    ["reject_once", "default"],
    ["reject_once", "default"],
    ["reject_once", "default"],
    ["reject_once", "default"],
    ["reject_once", "default"],
    ["reject_once", "default"],
    ["reject_once", "default"],
    ["reject_once", "default"],
    ["reject_once", 4],
    ["allow_once", 1],
  ]);
  assert.deepEqual(reports[1].exit, { code: 0, signal: null });
  // An empty repository: git log ran and said so (exit 128).
  assert.deepEqual(reports[13].exit, { code: 128, signal: null });
  for (const index of [0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]) {
    assert.match(String(reports[index].error), /permission policy rejected/);
  }
}

/** The operator's flags of the attack: its rules, what no rule decides is rejected, client terminals on. */
export function smugglingOperatorFlags(
  attack: ReturnType<typeof smugglingAttack>,
): string[] {
  return [
    ...["--client-terminals", "true"],
    ...["--permission-decision", "reject_once"],
    ...["--permission-rules-json", JSON.stringify(attack.rules)],
  ];
}

/**
 * The rule of `rules` deciding the client terminal `request` in `cwd`, as a
 * run checks it (the command's layers, title and alias matched; undefined:
 * none, `permission-decision` decides).
 */
export function ruleDeciding(
  rules: readonly PermissionRule[],
  request: Omit<CreateTerminalRequest, "sessionId">,
  options: { cwd: string; agentPath?: string },
): RuleMatch | undefined {
  const { cwd, agentPath = AGENT_PATH } = options;
  const checked = checkCommand({ sessionId: "s", ...request }, agentPath, cwd);
  return matchRule(rules, {
    kind: "execute",
    title: checked.title,
    paths: [cwd],
    command: checked.layers,
    alias: checked.alias,
  }, cwd);
}
