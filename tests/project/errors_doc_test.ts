import assert from "node:assert/strict";
import { ERROR_CODES } from "../../lib/errors.ts";
import { ROOT } from "../helpers.ts";

Deno.test("docs/errors.md lists exactly the codes of lib/errors.ts with the same retryability", () => {
  const text = Deno.readTextFileSync(`${ROOT}docs/errors.md`);
  const documented = new Map<string, string>();
  for (const match of text.matchAll(/^\| `([a-z_.]+)`\s*\| (yes|no)\s*\|/gm)) {
    documented.set(match[1], match[2]);
  }
  for (const [code, info] of Object.entries(ERROR_CODES)) {
    assert.equal(
      documented.get(code),
      info.retryable ? "yes" : "no",
      `${code} in docs/errors.md`,
    );
  }
  for (const code of documented.keys()) {
    assert.ok(
      code in ERROR_CODES,
      `${code} is documented but not in lib/errors.ts`,
    );
  }
});
