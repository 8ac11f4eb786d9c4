import assert from "node:assert/strict";
import { callerFloorSection } from "../../scripts/caller_floor_table.ts";
import { ROOT } from "../helpers.ts";

/** Table rows as cells, and the rest as words: what `deno fmt` leaves alone. */
function normalized(markdown: string): { rows: string[][]; words: string } {
  const lines = markdown.split("\n");
  const rows = lines.filter((line) => line.startsWith("| `"))
    .map((line) => line.slice(1, -1).split(" | ").map((cell) => cell.trim()));
  const words = lines.filter((line) => !line.startsWith("|"))
    .join(" ").split(/\s+/).filter(Boolean).join(" ");
  return { rows, words };
}

Deno.test('docs/http-api.md\'s "What a caller may set" is exactly what lib/run/caller_floor.ts decides', () => {
  const text = Deno.readTextFileSync(`${ROOT}docs/http-api.md`);
  const begin = text.indexOf("<!-- caller-floor-table: begin -->");
  const end = text.indexOf("<!-- caller-floor-table: end -->");
  assert.ok(begin > 0 && end > begin, "the section's markers are missing");
  const documented = normalized(
    text.slice(begin, end).split("\n").slice(1).join("\n"),
  );
  const generated = normalized(callerFloorSection());
  assert.deepEqual(
    documented,
    generated,
    "regenerate the section with `deno task caller-floor-table` (then deno fmt)",
  );
});
