/**
 * `deno task mutate`'s module set stays runnable and documented: every
 * module and test file it names exists, and `docs/testing.md` names every
 * module (a module renamed or split must be renamed there too).
 *
 * @module
 */

import assert from "node:assert/strict";
import { GUARD_MODULES } from "../../scripts/mutation_modules.ts";
import { ROOT } from "../helpers.ts";

Deno.test("every guard module of deno task mutate and each of its tests exist, and docs/testing.md names the module", () => {
  const documented = Deno.readTextFileSync(`${ROOT}docs/testing.md`);
  const missing: string[] = [];
  for (const entry of GUARD_MODULES) {
    for (const path of [entry.module, ...entry.tests]) {
      try {
        Deno.statSync(`${ROOT}${path}`);
      } catch {
        missing.push(`${entry.module}: ${path} does not exist`);
      }
    }
    if (!documented.includes(`\`${entry.module}\``)) {
      missing.push(`${entry.module} is not in docs/testing.md`);
    }
  }
  assert.deepEqual(missing, []);
});
