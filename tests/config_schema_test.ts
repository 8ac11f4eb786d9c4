/**
 * The run config's single description: each key's schema, built on first use,
 * defaults to what `parseRunConfig` fills in without building it.
 *
 * @module
 */

import assert from "node:assert/strict";
import { parseRunConfig, RUN_CONFIG_KEYS } from "../lib/config.ts";
import { RUN_CONFIG_SPEC, schemaDefault } from "../lib/config_schema.ts";

Deno.test("every key's schema default is the default a parsed config gets", () => {
  const parsed = parseRunConfig({
    provider: "custom",
    "acp-command": "agent --acp",
    workspace: "/srv/work",
  }) as unknown as Record<string, unknown>;
  for (const [key, spec] of Object.entries(RUN_CONFIG_SPEC)) {
    const fallback = schemaDefault(spec.schema);
    assert.deepEqual(RUN_CONFIG_KEYS[key].default, fallback, key);
    if (fallback !== undefined) {
      assert.deepEqual(parsed[RUN_CONFIG_KEYS[key].field], fallback, key);
    }
  }
});

Deno.test("a key's schema still checks its value and speaks its message", () => {
  assert.throws(
    () =>
      parseRunConfig({
        provider: "custom",
        workspace: "/srv/work",
        "permission-fallback": "ask",
      }),
    /permission-fallback: must be one of allow_once, allow_always, reject_once or reject_always/,
  );
  assert.throws(
    () =>
      parseRunConfig({
        provider: "custom",
        workspace: "/srv/work",
        "late-update-ms": "9000",
      }),
    /late-update-ms: must be at most 5000/,
  );
});
