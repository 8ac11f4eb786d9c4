/**
 * Which rule of `permission-rules-json` decides a tool call, and what it
 * decides: the first whose kind, title glob and path glob all match (a path
 * relative to the workspace, the workspace itself as `.`), `allow` and
 * `reject` meaning their `_once` kinds. A terminal-only rule (`command`,
 * `env`) never decides a tool call. Terminal commands are in
 * `tests/security/terminal_argv_test.ts`.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { PermissionRule } from "../../lib/config.ts";
import {
  matchRule,
  ruleDecision,
  type RuleMatch,
  type RuleSubject,
} from "../../lib/run/permission_rules.ts";
import { tempDir } from "../helpers.ts";
import { ruleDeciding } from "../security/argv_checks.ts";

const ROOT = "/work/project";

function decided(rules: PermissionRule[], subject: RuleSubject) {
  return matchRule(rules, subject, ROOT);
}

Deno.test("the first rule matching kind, title and path decides; none leaves it to permission-decision", () => {
  const rules: PermissionRule[] = [
    { kind: "execute", title: "Run rm *", decision: "reject" },
    { kind: ["read", "search"], decision: "allow" },
    { path: "secrets/**", decision: "reject_always" },
    { title: "Edit *", path: "src/*.ts", decision: "allow_always" },
    { kind: "other", decision: "ask" },
  ];
  const cases: [
    RuleSubject,
    { index: number; decision: string } | undefined,
  ][] = [
    [{ kind: "execute", title: "Run rm -rf build", paths: [] }, {
      index: 0,
      decision: "reject_once",
    }],
    [{ kind: "execute", title: "Run ls", paths: [] }, undefined],
    [{ kind: "read", title: "Read a", paths: ["secrets/a"] }, {
      index: 1,
      decision: "allow_once",
    }],
    [{ kind: "search", title: "Find", paths: [] }, {
      index: 1,
      decision: "allow_once",
    }],
    [{ kind: "edit", title: "Edit k", paths: ["secrets/k.pem"] }, {
      index: 2,
      decision: "reject_always",
    }],
    [{ kind: "edit", title: "Edit k", paths: [`${ROOT}/secrets/a/k.pem`] }, {
      index: 2,
      decision: "reject_always",
    }],
    [{ kind: "edit", title: "Edit b", paths: ["src/b.ts"] }, {
      index: 3,
      decision: "allow_always",
    }],
    [{ kind: "edit", title: "Edit b", paths: ["docs/x", "src/b.ts"] }, {
      index: 3,
      decision: "allow_always",
    }],
    [{ kind: "edit", title: "Write b", paths: ["src/b.ts"] }, undefined],
    [{ kind: "edit", title: "Edit b", paths: ["src/a/b.ts"] }, undefined],
    [{ kind: "edit", title: "Edit b", paths: [] }, undefined],
    // No kind, or an empty one, is "other".
    [{ title: "Do", paths: [] }, { index: 4, decision: "ask" }],
    [{ kind: "", title: "Do", paths: [] }, { index: 4, decision: "ask" }],
    [{ kind: null, title: null, paths: [] }, { index: 4, decision: "ask" }],
  ];
  for (const [subject, want] of cases) {
    assert.deepEqual(decided(rules, subject), want, JSON.stringify(subject));
  }
});

Deno.test("a path rule sees paths relative to the workspace; the workspace itself is .", () => {
  const rules: PermissionRule[] = [{ path: ".", decision: "reject" }];
  assert.equal(decided(rules, { paths: [ROOT] })?.index, 0);
  assert.equal(decided(rules, { paths: ["."] })?.index, 0);
  assert.equal(decided(rules, { paths: ["a"] }), undefined);
  const outside: PermissionRule[] = [{ path: "../**", decision: "reject" }];
  assert.equal(decided(outside, { paths: ["/etc/passwd"] })?.index, 0);
  assert.equal(decided(outside, { paths: ["src/a"] }), undefined);
});

Deno.test("a title rule matches only the title; a command or env rule never decides a tool call", () => {
  const rules: PermissionRule[] = [
    { command: ["rm", "..."], decision: "reject" },
    { command: ["ls"], env: { A: "*" }, decision: "reject" },
    { env: { A: "*" }, decision: "reject" } as PermissionRule,
    { title: "rm *", decision: "ask" },
  ];
  assert.deepEqual(
    decided(rules, { kind: "execute", title: "rm -rf build", paths: [] }),
    { index: 3, decision: "ask" },
  );
  assert.equal(
    decided(rules, { kind: "execute", title: "ls", paths: [] }),
    undefined,
  );
  assert.equal(
    decided([{ title: "rm *", decision: "ask" }], {
      kind: "execute",
      paths: [],
    }),
    undefined,
    "no title is not any title",
  );
});

Deno.test("allow and reject mean their _once kinds; the exact kinds and ask stay as they are", () => {
  for (
    const [decision, kind] of [
      ["allow", "allow_once"],
      ["reject", "reject_once"],
      ["ask", "ask"],
      ["allow_always", "allow_always"],
      ["reject_always", "reject_always"],
      ["allow_once", "allow_once"],
    ]
  ) {
    assert.equal(ruleDecision(decision), kind, decision);
  }
});

/** The rule deciding the client terminal command `command args…`, as a run checks it. */
function decidedCommand(
  rules: PermissionRule[],
  command: string,
  args: string[],
): RuleMatch | undefined {
  return ruleDeciding(rules, { command, args }, {
    cwd: tempDir("rules-cwd-"),
  });
}

Deno.test("a terminal title rule that names no program (assignments only, or blank) decides no command, allowing or not", () => {
  for (const title of ["FOO=1", "PATH=* HOME=*", " "]) {
    for (const decision of ["allow", "reject", "ask"]) {
      assert.equal(
        decidedCommand([{ title, decision }], "ls", ["-la"]),
        undefined,
        `${decision} ${JSON.stringify(title)}`,
      );
    }
  }
});

Deno.test("a rejecting title rule meets a command by its words or its line, never by what the command lacks", () => {
  // No alias (the program is named bare): nothing but the line is tested.
  const rules: PermissionRule[] = [{ title: "un*", decision: "reject" }];
  assert.equal(decidedCommand(rules, "ls", ["-la"]), undefined);
  assert.deepEqual(decidedCommand(rules, "unzip", []), {
    index: 0,
    decision: "reject_once",
  });
  assert.deepEqual(
    decidedCommand([{ title: "rm -rf *", decision: "reject" }], "rm", [
      "-rf",
      "build",
    ]),
    { index: 0, decision: "reject_once" },
  );
  assert.equal(
    decidedCommand([{ title: "rm -rf *", decision: "reject" }], "ls", ["-la"]),
    undefined,
  );
});
