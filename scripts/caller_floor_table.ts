/**
 * `docs/http-api.md`'s "What a caller may set" table from the one caller
 * floor (`lib/run/caller_floor.ts`), and the operator-only keys after it. Run
 * it to print both; paste them between the section's markers and run
 * `deno fmt`. `tests/project/caller_floor_doc_test.ts` checks the docs
 * against {@linkcode callerFloorSection}.
 *
 * @module
 */

import { RUN_CONFIG_KEYS } from "../lib/config.ts";
import {
  CALLER_CONFIG_KEYS,
  callerFloorTableMarkdown,
} from "../lib/run/caller_floor.ts";
import { COMMAND_CONFIG_KEYS } from "../lib/server/policy.ts";

/** The run-config keys no caller may set, whatever the server's flags. */
export function operatorOnlyKeys(): string[] {
  return Object.keys(RUN_CONFIG_KEYS).filter((key) =>
    !CALLER_CONFIG_KEYS.includes(key) && !COMMAND_CONFIG_KEYS.includes(key)
  );
}

/** The generated part of the section, as Markdown (before `deno fmt`). */
export function callerFloorSection(): string {
  return callerFloorTableMarkdown() + "\n" +
    `Operator only (a request that sets one is \`403 http.forbidden\`): ${
      operatorOnlyKeys().map((key) => `\`${key}\``).join(", ")
    }.\n`;
}

if (import.meta.main) console.log(callerFloorSection());
