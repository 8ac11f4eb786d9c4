/**
 * Edges of the terminal rules' argv matching that the docs' examples do not
 * reach: an allowing title rule names the whole command (no further
 * arguments), `...` after globs still needs an argument per glob, a title's
 * extra spaces separate nothing, and a title of assignments only names no
 * program.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { PermissionRule } from "../../lib/config.ts";
import { ruleDeciding, workspace } from "./argv_checks.ts";

/** The index of the rule deciding `command args…` (-1: none). */
function decidingRule(
  rules: PermissionRule[],
  command: string,
  args: string[],
): number {
  return ruleDeciding(rules, { command, args }, { cwd: workspace() })?.index ??
    -1;
}

Deno.test("an allowing title rule allows that command only, not with more arguments", () => {
  const rules: PermissionRule[] = [{ title: "ls -la", decision: "allow" }];
  assert.equal(decidingRule(rules, "ls", ["-la"]), 0);
  assert.equal(decidingRule(rules, "ls", ["-la", "/etc"]), -1);
});

Deno.test("... after globs allows more arguments, never fewer than the globs", () => {
  const rules: PermissionRule[] = [
    { command: ["cat", "*", "..."], decision: "allow" },
  ];
  assert.equal(decidingRule(rules, "cat", ["a.txt"]), 0);
  assert.equal(decidingRule(rules, "cat", ["a.txt", "b.txt"]), 0);
  assert.equal(decidingRule(rules, "cat", []), -1);
});

Deno.test("extra spaces in a title rule separate no empty arguments", () => {
  const rules: PermissionRule[] = [
    { title: "  rm  -rf   build ", decision: "reject" },
  ];
  assert.equal(decidingRule(rules, "rm", ["-rf", "build"]), 0);
});

Deno.test("a title of assignments only names no program: it matches no command", () => {
  const rules: PermissionRule[] = [{ title: "FOO=1", decision: "reject" }];
  assert.equal(decidingRule(rules, "ls", []), -1);
});

Deno.test("a title word with an assignment inside it (x-FOO=1) is the program, not an assignment: it allows no other command", () => {
  const rules: PermissionRule[] = [{ title: "x-FOO=1 ls", decision: "allow" }];
  const decided = ruleDeciding(rules, {
    command: "ls",
    args: [],
    env: [{ name: "FOO", value: "1" }],
  }, { cwd: workspace() });
  assert.equal(decided, undefined);
});
