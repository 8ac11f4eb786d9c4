/**
 * The run config as `/openapi.json` shows it: the JSON Schema of a caller's
 * `config` object, made from the run config's one description
 * (`lib/config_schema.ts`).
 *
 * @module
 */

import { z } from "zod";
import { type ConfigKind, RUN_CONFIG_SPEC } from "../../config_schema.ts";

/**
 * The JSON Schema (2020-12, as OpenAPI 3.1 uses) of a caller's run config:
 * every key with its type, default, limits, enum and description. Keys that
 * are not strings also accept their text form (`"true"`, `"30"`, JSON text).
 */
export function runConfigJsonSchema(): Record<string, unknown> {
  const properties: Record<string, unknown> = {};
  for (const [key, spec] of Object.entries(RUN_CONFIG_SPEC)) {
    const schema = z.toJSONSchema(spec.schema, { io: "input" }) as Record<
      string,
      unknown
    >;
    delete schema.$schema;
    properties[key] = acceptText(schema, spec.kind);
  }
  return {
    type: "object",
    description:
      "Kebab-case run-config keys (docs/config.md; snake_case spellings are accepted too); server defaults fill the rest.",
    properties: {
      ...properties,
      "advanced-settings": {
        description: "Accepted and ignored (LangBot form visibility).",
      },
    },
  };
}

/** Widens a key's JSON Schema to the text form a caller may send instead. */
function acceptText(
  schema: Record<string, unknown>,
  kind: ConfigKind,
): Record<string, unknown> {
  if (kind === "json-text") {
    return { ...schema, type: ["string", "object", "array"] };
  }
  if (schema.type === "string" || schema.type === undefined) return schema;
  return { ...schema, type: [schema.type, "string"] };
}
