/**
 * `docs/config.md`'s key table from the run-config schema
 * (`lib/config_schema.ts`). Run it to print the table; paste it over the table
 * and run `deno fmt`. `tests/project/docs_test.ts` checks the docs against
 * {@linkcode configTableRows}.
 *
 * @module
 */

import {
  RUN_CONFIG_SPEC,
  schemaDefault,
  schemaDescription,
} from "../lib/config_schema.ts";

/** The rows of `docs/config.md`'s key table: key, default, meaning. */
export function configTableRows(): Array<[string, string, string]> {
  return Object.entries(RUN_CONFIG_SPEC).map(([key, spec]) => {
    const fallback = schemaDefault(spec.schema);
    const shown = spec.docDefault ??
      `\`${
        typeof fallback === "string" ? fallback : JSON.stringify(fallback)
      }\``;
    return [`\`${key}\``, shown, schemaDescription(spec.schema)];
  });
}

/** `docs/config.md`'s key table as Markdown (before `deno fmt` pads it). */
export function configTableMarkdown(): string {
  const lines = [
    "| key | default | meaning |",
    "| --- | --- | --- |",
    ...configTableRows().map((row) => `| ${row.join(" | ")} |`),
  ];
  return lines.join("\n") + "\n";
}

if (import.meta.main) console.log(configTableMarkdown());
