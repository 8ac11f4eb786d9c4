import assert from "node:assert/strict";
import type {
  PermissionOption,
  PermissionOptionKind,
} from "@agentclientprotocol/sdk";
import { RunnerError } from "../../lib/errors.ts";
import {
  choosePermission,
  DEFAULT_PERMISSION_DECISION,
  parsePermissionDecision,
  PERMISSION_KINDS,
} from "../../lib/acp/permission_options.ts";

const SHORT: Record<string, PermissionOptionKind> = {
  ao: "allow_once",
  aa: "allow_always",
  ro: "reject_once",
  ra: "reject_always",
};

function option(kind: string, suffix = ""): PermissionOption {
  return {
    optionId: `id-${kind}${suffix}`,
    name: `Option ${kind}`,
    kind: kind as PermissionOptionKind,
  };
}

// Offered kinds → the kind chosen for wanted allow_once, allow_always,
// reject_once, reject_always ("--" = answered cancelled).
const TABLE: [string, string][] = [
  ["ao", "ao ao -- --"],
  ["aa", "aa aa -- --"],
  ["ro", "ro ro ro ro"],
  ["ra", "ra ra ra ra"],
  ["ao aa", "ao aa -- --"],
  ["ao ro", "ao ao ro ro"],
  ["ao ra", "ao ao ra ra"],
  ["aa ro", "aa aa ro ro"],
  ["aa ra", "aa aa ra ra"],
  ["ro ra", "ro ro ro ra"],
  ["ao aa ro", "ao aa ro ro"],
  ["ao aa ra", "ao aa ra ra"],
  ["ao ro ra", "ao ao ro ra"],
  ["aa ro ra", "aa aa ro ra"],
  ["ao aa ro ra", "ao aa ro ra"],
];

Deno.test("choosePermission picks the expected kind for every wanted × offered set", () => {
  for (const [offeredShort, expectedRow] of TABLE) {
    const kinds = offeredShort.split(" ").map((short) => SHORT[short]);
    const expected = expectedRow.split(" ");
    const wantedOrder: PermissionOptionKind[] = [
      "allow_once",
      "allow_always",
      "reject_once",
      "reject_always",
    ];
    for (const [index, wanted] of wantedOrder.entries()) {
      for (const order of [kinds, [...kinds].reverse()]) {
        const result = choosePermission({
          options: order.map((kind) => option(kind)),
          wanted,
        });
        const context = `wanted ${wanted}, offered ${order.join(",")}`;
        if (expected[index] === "--") {
          assert.equal("cancelled" in result, true, context);
          continue;
        }
        const kind = SHORT[expected[index]];
        assert.deepEqual(
          "cancelled" in result
            ? result
            : [result.optionId, result.kind, result.exact],
          [`id-${kind}`, kind, kind === wanted],
          context,
        );
      }
    }
  }
});

Deno.test("choosePermission explains each kind of choice", () => {
  const all = PERMISSION_KINDS.map((kind) => option(kind));
  assert.deepEqual(choosePermission({ options: all, wanted: "allow_once" }), {
    optionId: "id-allow_once",
    kind: "allow_once",
    exact: true,
    reason: '"allow_once" was offered',
  });
  assert.deepEqual(
    choosePermission({
      options: [option("allow_always"), option("reject_once")],
      wanted: "allow_once",
    }),
    {
      optionId: "id-allow_always",
      kind: "allow_always",
      exact: false,
      reason:
        '"allow_once" was not offered; chose "allow_always" of the same family',
    },
  );
  assert.deepEqual(
    choosePermission({
      options: [option("reject_always"), option("reject_once")],
      wanted: "allow_always",
    }),
    {
      optionId: "id-reject_once",
      kind: "reject_once",
      exact: false,
      reason:
        'no allow option was offered; chose the safest offered, "reject_once"',
    },
  );
  assert.deepEqual(
    choosePermission({
      options: [option("allow_once")],
      wanted: "reject_once",
    }),
    {
      cancelled: true,
      reason:
        '"reject_once" was wanted but the agent offered no reject option; answered cancelled rather than allow',
    },
  );
});

Deno.test("choosePermission answers cancelled when nothing usable is offered", () => {
  const none = {
    cancelled: true,
    reason: "the agent offered no permission option this runner knows",
  };
  for (const wanted of PERMISSION_KINDS) {
    assert.deepEqual(choosePermission({ options: [], wanted }), none, wanted);
    assert.deepEqual(
      choosePermission({ options: [option("allow_sometimes")], wanted }),
      none,
      wanted,
    );
  }
});

Deno.test("choosePermission takes the first of duplicate kinds and skips unknown kinds", () => {
  const result = choosePermission({
    options: [
      option("allow_sometimes"),
      option("allow_once", "-a"),
      option("allow_once", "-b"),
    ],
    wanted: "allow_once",
  });
  assert.equal(
    "cancelled" in result ? result : result.optionId,
    "id-allow_once-a",
  );
  const sibling = choosePermission({
    options: [option("ask_later"), option("reject_always")],
    wanted: "reject_once",
  });
  assert.equal(
    "cancelled" in sibling ? sibling : sibling.kind,
    "reject_always",
  );
});

Deno.test("parsePermissionDecision accepts the four kinds in any case, with - or _", () => {
  for (const kind of PERMISSION_KINDS) {
    assert.equal(parsePermissionDecision(kind), kind);
    assert.equal(
      parsePermissionDecision(` ${kind.toUpperCase().replace("_", "-")} `),
      kind,
    );
  }
});

Deno.test("parsePermissionDecision defaults an absent value to allow_once", () => {
  assert.equal(DEFAULT_PERMISSION_DECISION, "allow_once");
  for (const value of [undefined, null, ""]) {
    assert.equal(parsePermissionDecision(value), "allow_once");
  }
});

Deno.test("parsePermissionDecision refuses anything else with config.invalid", () => {
  const cases: [unknown, string][] = [
    ["allow", '"allow"'],
    ["cancelled", '"cancelled"'],
    [true, "a boolean"],
    [3, "a number"],
    [{ kind: "allow_once" }, "an object"],
    [["allow_once"], "an array"],
    ["x".repeat(100), JSON.stringify("x".repeat(40))],
  ];
  for (const [value, shown] of cases) {
    assert.throws(() => parsePermissionDecision(value), (error) => {
      assert.ok(error instanceof RunnerError);
      assert.equal(error.code, "config.invalid");
      assert.equal(
        error.message,
        `permission-decision must be one of allow_once, allow_always, reject_once or reject_always (got ${shown}).`,
      );
      return true;
    });
  }
});
