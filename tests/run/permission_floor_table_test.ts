/**
 * The operator's permission policy as a floor, every combination: for each
 * operator decision and fallback and each one a caller asks, the caller's
 * request is refused exactly when it is looser (the order `allow_always` <
 * `allow_once` < `ask` < `reject_once` < `reject_always`, written out here,
 * not taken from the code), with the message a caller reads. Rules and the
 * timeout likewise. Through `resolveCallerConfig`, what `runner serve` runs
 * on every request.
 *
 * @module
 */

import assert from "node:assert/strict";
import { tempDir } from "../helpers.ts";
import { type CallerRefusal, callerRefusal } from "../caller_floor_helpers.ts";

const WORKSPACE = tempDir("floor-ws-");

const ORDER = [
  "allow_always",
  "allow_once",
  "ask",
  "reject_once",
  "reject_always",
];

/** The fallbacks, in the same order (a fallback cannot ask). */
const FALLBACKS = ORDER.filter((decision) => decision !== "ask");

/** The refusal a caller gets (undefined: accepted). */
function refusal(
  operator: Record<string, unknown>,
  caller: Record<string, unknown>,
): CallerRefusal | undefined {
  return callerRefusal(operator, caller, { workspace: WORKSPACE });
}

for (
  const [key, order] of [
    ["permission-decision", ORDER],
    ["permission-fallback", FALLBACKS],
  ] as const
) {
  Deno.test(`a caller's ${key} is refused exactly when it is looser than the operator's`, () => {
    for (const [floor, operator] of order.entries()) {
      for (const [asked, caller] of order.entries()) {
        const got = refusal({ [key]: operator }, { [key]: caller });
        const what = `operator ${operator}, caller ${caller}`;
        if (asked >= floor) {
          assert.equal(got, undefined, what);
          continue;
        }
        assert.deepEqual(got, {
          code: "http.forbidden",
          key,
          message:
            `${key}: ${caller} is looser than the server's ${operator}. A caller may only make the operator's permission policy stricter; the operator sets it with runner serve --${key}.`,
        }, what);
      }
    }
  });
}

Deno.test("a caller's permission-timeout is refused when it is shorter and the fallback approves", () => {
  const approving = { "permission-fallback": "allow_once" };
  assert.deepEqual(
    refusal(approving, { "permission-timeout": 119 }),
    {
      code: "http.forbidden",
      key: "permission-timeout",
      message:
        "permission-timeout: 119 s would approve sooner than the server's 120 s (the fallback is allow_once). A caller may only make the operator's permission policy stricter; the operator sets it with runner serve --permission-timeout.",
    },
  );
  // The same, a longer or a rejecting timeout: nothing is approved sooner.
  assert.equal(refusal(approving, { "permission-timeout": 120 }), undefined);
  assert.equal(refusal(approving, { "permission-timeout": 121 }), undefined);
  assert.equal(
    refusal({ "permission-fallback": "reject_once" }, {
      "permission-timeout": 1,
    }),
    undefined,
  );
  assert.equal(refusal({}, { "permission-timeout": 1 }), undefined);
  // A stricter approving fallback with a shorter timeout still approves sooner.
  assert.equal(
    refusal({ "permission-fallback": "allow_always" }, {
      "permission-fallback": "allow_once",
      "permission-timeout": 5,
    })?.key,
    "permission-timeout",
  );
  // The operator's own short timeout is no caller's doing.
  assert.equal(
    refusal({ ...approving, "permission-timeout": 5 }, {}),
    undefined,
  );
});

Deno.test("caller rules: refused where the operator has rules, or when one decides looser than the operator's decision", () => {
  const operatorRules = {
    "permission-decision": "allow_always",
    "permission-rules-json": [{ title: "rm *", decision: "reject_always" }],
  };
  assert.deepEqual(
    refusal(operatorRules, {
      "permission-rules-json": [{ title: "ls", decision: "reject_once" }],
    }),
    {
      code: "http.forbidden",
      key: "permission-rules-json",
      message:
        "permission-rules-json: the server has permission rules of its own; a caller cannot replace them. A caller may only make the operator's permission policy stricter; the operator sets it with runner serve --permission-rules-json.",
    },
  );
  // A caller who sends no rules keeps the operator's, and may run.
  assert.equal(refusal(operatorRules, {}), undefined);
  assert.equal(
    refusal(operatorRules, { "permission-decision": "ask" }),
    undefined,
  );
  const ask = { "permission-decision": "ask" };
  assert.deepEqual(
    refusal(ask, {
      "permission-rules-json": [
        { title: "ls", decision: "reject" },
        { title: "cat *", decision: "allow" },
      ],
    }),
    {
      code: "http.forbidden",
      key: "permission-rules-json",
      message:
        "permission-rules-json: rule 1 decides allow, looser than the server's ask. A caller may only make the operator's permission policy stricter; the operator sets it with runner serve --permission-rules-json.",
    },
  );
  assert.equal(
    refusal(ask, {
      "permission-rules-json": [{ title: "ls", decision: "allow_always" }],
    })?.key,
    "permission-rules-json",
  );
  // As strict or stricter: accepted, whatever the first rule.
  for (const decision of ["ask", "reject", "reject_once", "reject_always"]) {
    assert.equal(
      refusal(ask, {
        "permission-rules-json": [
          { title: "x", decision: "reject_always" },
          { title: "ls", decision },
        ],
      }),
      undefined,
      decision,
    );
  }
  assert.equal(
    refusal({ "permission-decision": "allow_once" }, {
      "permission-rules-json": [{ title: "ls", decision: "allow" }],
    }),
    undefined,
  );
});
