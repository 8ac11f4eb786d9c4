/**
 * Prints `docs/config.md`'s key table from the run-config schema
 * (`lib/config_schema.ts`); paste it over the table and run `deno fmt`.
 *
 * @module
 */

import { configTableMarkdown } from "../lib/config_schema.ts";

console.log(configTableMarkdown());
