/**
 * The "must catch" cases of `docs/testing.md` stay runnable: each break's
 * text still stands exactly once in its file, and each names a test file
 * that exists. (Making the breaks and running their tests is
 * `scripts/must_catch.ts`, by hand.)
 *
 * @module
 */

import assert from "node:assert/strict";
import { MUST_CATCH } from "../../scripts/must_catch.ts";
import { ROOT } from "../helpers.ts";

Deno.test("every must-catch break still matches its source exactly once and names an existing test", () => {
  const stale: string[] = [];
  for (const entry of MUST_CATCH) {
    const text = Deno.readTextFileSync(`${ROOT}${entry.file}`);
    const count = text.split(entry.find).length - 1;
    if (count !== 1) {
      stale.push(`${entry.name}: found ${count}× in ${entry.file}`);
    }
    Deno.statSync(`${ROOT}${entry.test}`);
  }
  assert.deepEqual(stale, []);
  const documented = Deno.readTextFileSync(`${ROOT}docs/testing.md`);
  for (const entry of MUST_CATCH) {
    assert.ok(
      documented.includes(entry.file),
      `${entry.name}: ${entry.file} is not in docs/testing.md`,
    );
  }
});
