/**
 * What an operator reads when a listener's token is refused (`--api-token`,
 * `--daemon-token`, `--cluster-token`): the rule it breaks, the flag to fix
 * and how to make a good one — never the token itself. The limits hold at
 * their edges: 32 characters and 12 distinct ones pass, one less does not;
 * every published token is refused; loopback is exactly 127.0.0.0/8,
 * `::1` and `localhost`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { RunnerError } from "../../lib/errors.ts";
import {
  checkListenerToken,
  isLoopbackHost,
  looksWeak,
} from "../../lib/hub/token_rules.ts";

const HINT =
  "Generate one with `runner token` (32 random bytes) and give it to both sides.";

/** The refusal of `token` on `host` (undefined: accepted). */
function refusal(
  token: string | undefined,
  host = "0.0.0.0",
): { code: string; message: string; key: unknown } | undefined {
  try {
    checkListenerToken({ token, host, purpose: "--daemon-token" });
    return undefined;
  } catch (error) {
    assert.ok(error instanceof RunnerError, String(error));
    return { code: error.code, message: error.message, key: error.detail?.key };
  }
}

function refused(problem: string) {
  return {
    code: "config.invalid",
    message: `--daemon-token is refused: ${problem}. ${HINT}`,
    key: "--daemon-token",
  };
}

Deno.test("a refused token's message names the rule, the flag and how to make one, never the token", () => {
  const short = "Zq8Wm3Lx7Vt2Nb5Rc9Hd4Jf6Kp1Ys0G"; // 31 characters, all distinct
  assert.deepEqual(
    refusal(short),
    refused("it is shorter than 32 characters"),
  );
  assert.deepEqual(
    refusal(short, "127.0.0.1"),
    refused("it is shorter than 32 characters"),
    "a given token is checked on loopback too",
  );
  assert.deepEqual(
    refusal(`${short}e `),
    refused(
      "it has leading or trailing whitespace (a copy-paste mistake?)",
    ),
  );
  assert.deepEqual(
    refusal("abcdefghijk".repeat(3)),
    refused("it has fewer than 12 distinct characters"),
  );
  for (
    const published of [
      "golden-token-7f3a9c2e5b1d4f6a8c0e2b4d6f8a",
      "EXAMPLE-ONLY-do-not-use-4mX9qT2vL7pR8sK3wN6y",
      "daemon-e2e-token-Jq7Xw2Lk9Vb4Nz6Tc1Rm8Hs3",
    ]
  ) {
    assert.deepEqual(
      refusal(published),
      refused("it is published in the runner's docs or tests"),
      published,
    );
    assert.equal(looksWeak(published), true, published);
  }
  for (const token of [undefined, ""]) {
    assert.deepEqual(refusal(token, "0.0.0.0"), {
      code: "config.invalid",
      message:
        `--daemon-token is required when listening on 0.0.0.0 (not loopback). ${HINT}`,
      key: "--daemon-token",
    });
    assert.equal(refusal(token, "localhost"), undefined);
  }
});

Deno.test("the limits at their edges: 32 characters and 12 distinct ones pass, one less does not", () => {
  const exactly32 = "Zq8Wm3Lx7Vt2Nb5Rc9Hd4Jf6Kp1Ys0Ge";
  assert.equal(exactly32.length, 32);
  assert.equal(refusal(exactly32), undefined);
  assert.equal(looksWeak(exactly32), false);
  assert.equal(looksWeak(exactly32.slice(1)), true);
  const twelve = "abcdefghijkl".repeat(3);
  assert.equal(refusal(twelve), undefined);
  assert.equal(looksWeak(twelve), false);
  assert.equal(looksWeak("abcdefghijk".repeat(3)), true);
});

Deno.test("loopback is 127.0.0.0/8, ::1 and localhost, however written; nothing else is", () => {
  for (
    const host of [
      "127.0.0.1",
      "127.255.255.254",
      "127.10.200.3",
      " 127.0.0.1 ",
      "Localhost",
      " localhost",
      "[::1]",
      "::1",
    ]
  ) {
    assert.equal(isLoopbackHost(host), true, JSON.stringify(host));
  }
  for (
    const host of [
      "127.0.0",
      "127.0.0.1.2",
      "127.0.0.1000",
      "127.a.0.1",
      "[::1",
      "[[::1]]",
      "localhost.",
      "10.127.0.0.1",
      "localhost[]",
      "[127.0.0.1]1",
    ]
  ) {
    assert.equal(isLoopbackHost(host), false, JSON.stringify(host));
  }
});
