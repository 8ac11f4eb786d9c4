/**
 * The hardening arguments (`lib/agent/sandbox_hardening.ts`) where bubblewrap
 * cannot give the agent a user namespace, or cannot be started at all: the
 * agent is still started without capabilities, the check is made once per
 * process, and the host-side `bwrap` of the check gets none of the runner's
 * environment. (Where user namespaces work, `security/sandbox_escape_test.ts`
 * shows what the confined agent finds.)
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import {
  hardeningArgs,
  trueInBwrap,
  userNamespaceWorks,
} from "../../lib/agent/sandbox_hardening.ts";
import { tempDir } from "../helpers.ts";

/**
 * A stand-in `bwrap` that records each call's arguments (one line each) and
 * its environment, and fails as a kernel without user namespaces would when
 * asked for one.
 */
function bwrapWithoutUserNamespaces(): {
  bwrap: string;
  calls(): string[];
  environment(): string;
} {
  const dir = tempDir("fake-bwrap-");
  const bwrap = join(dir, "bwrap");
  const calls = join(dir, "calls");
  const environment = join(dir, "environment");
  Deno.writeTextFileSync(
    bwrap,
    `#!/bin/sh
echo "$*" >> '${calls}'
/usr/bin/env > '${environment}'
case " $* " in
  *" --unshare-user "*|*" --disable-userns "*)
    echo 'bwrap: setting up uid map: Permission denied' >&2; exit 1 ;;
esac
exit 0
`,
  );
  Deno.chmodSync(bwrap, 0o755);
  const read = (path: string) => {
    try {
      return Deno.readTextFileSync(path);
    } catch {
      return "";
    }
  };
  return {
    bwrap,
    calls: () => read(calls).split("\n").filter((line) => line),
    environment: () => read(environment),
  };
}

Deno.test("where bubblewrap cannot make a user namespace, the agent is still started with every capability dropped, and nothing bwrap does not know; the check is made once", () => {
  const fake = bwrapWithoutUserNamespaces();
  assert.deepEqual(hardeningArgs(fake.bwrap), ["--cap-drop", "ALL"]);
  assert.deepEqual(hardeningArgs(fake.bwrap), ["--cap-drop", "ALL"]);
  assert.equal(userNamespaceWorks(fake.bwrap), false);
  const calls = fake.calls();
  assert.equal(calls.length, 1, `bwrap started for the check: ${calls}`);
  assert.match(calls[0], /--unshare-user --disable-userns .*-- true$/);
});

Deno.test("where bubblewrap cannot be started at all, no user namespace is assumed: capabilities dropped, the answer a plain false", () => {
  const missing = join(tempDir("no-bwrap-"), "bwrap");
  assert.equal(userNamespaceWorks(missing), false);
  assert.deepEqual(hardeningArgs(missing), ["--cap-drop", "ALL"]);
  assert.throws(() => trueInBwrap(missing), Deno.errors.NotFound);
});

Deno.test("the bwrap of the check runs on the host with none of the runner's environment (a secret, a loader variable)", () => {
  const fake = bwrapWithoutUserNamespaces();
  const secret = `sk-hardening-${crypto.randomUUID()}`;
  const loader = Deno.env.get("LD_LIBRARY_PATH");
  Deno.env.set("RUNNER_HARDENING_TEST_SECRET", secret);
  Deno.env.set("LD_LIBRARY_PATH", "/nonexistent/hardening-test");
  try {
    assert.equal(trueInBwrap(fake.bwrap).success, true);
    assert.equal(userNamespaceWorks(fake.bwrap), false);
  } finally {
    Deno.env.delete("RUNNER_HARDENING_TEST_SECRET");
    if (loader === undefined) Deno.env.delete("LD_LIBRARY_PATH");
    else Deno.env.set("LD_LIBRARY_PATH", loader);
  }
  const environment = fake.environment();
  assert.ok(!environment.includes(secret), environment);
  assert.ok(!environment.includes("LD_LIBRARY_PATH"), environment);
  assert.ok(!/^(PATH|HOME)=/m.test(environment), environment);
});
