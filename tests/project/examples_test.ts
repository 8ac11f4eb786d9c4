/**
 * The entry points a newcomer starts from carry an `@example` that really
 * runs, and the suite runs them: `deno task test` passes `--doc lib/`, which
 * type-checks and runs every ` ```ts ` block in `lib/`'s JSDoc.
 *
 * @module
 */

import assert from "node:assert/strict";
import { ROOT } from "../helpers.ts";

/** Each entry point: its file and the declaration its example documents. */
const ENTRY_POINTS: ReadonlyArray<[file: string, declaration: string]> = [
  ["lib/run/manager.ts", "export function createRunManager("],
  ["lib/run/agent_run.ts", "export function startAgentRun("],
  ["lib/run/location.ts", "export interface AgentLocation "],
  ["lib/store/open.ts", "export async function openStore("],
  ["lib/hub/serve_hub.ts", "export function serveHub("],
];

/** The JSDoc block right above `declaration` in `text`. */
function docAbove(text: string, declaration: string): string {
  const at = text.indexOf(declaration);
  assert.ok(at > 0, `${declaration} not found`);
  const before = text.slice(0, at).trimEnd();
  assert.ok(before.endsWith("*/"), `${declaration} has no JSDoc`);
  return before.slice(before.lastIndexOf("/**"));
}

Deno.test("createRunManager, startAgentRun, AgentLocation, openStore and serveHub each have an @example that runs", () => {
  for (const [file, declaration] of ENTRY_POINTS) {
    const doc = docAbove(Deno.readTextFileSync(ROOT + file), declaration);
    const example = doc.slice(doc.indexOf("@example"));
    assert.ok(doc.includes("@example"), `${file}: no @example`);
    // `ignore` would skip it; a block without a language is not extracted.
    assert.match(example, /^ \* ```ts$/m, `${file}: no \`\`\`ts block`);
    assert.match(example, /\bassert\b/, `${file}: the example checks nothing`);
  }
});

Deno.test("deno task test runs lib/'s examples with the suite", () => {
  const script = Deno.readTextFileSync(`${ROOT}scripts/test.ts`);
  assert.match(script, /\["--doc", "lib\/", "tests\/"\]/);
});
