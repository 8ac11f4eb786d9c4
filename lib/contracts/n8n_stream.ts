/**
 * What LangBot's n8n runner reads from a webhook, as JSON Schema (2020-12):
 * a stream of JSON objects, `{"type":"item","content":…}` then
 * `{"type":"end"}` (anything else it skips), or, without streaming, one JSON
 * object whose output key holds the answer. See `docs/contracts.md`.
 *
 * @module
 */

import type { JsonSchema } from "./langbot_result.ts";

/** One object of the webhook's stream, as LangBot's n8n runner reads it. */
export const N8N_STREAM_OBJECT_SCHEMA: JsonSchema = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  $id: "https://runner.invalid/contracts/n8n-stream-object",
  title: "n8n stream object (LangBot's n8n runner)",
  oneOf: [
    {
      type: "object",
      properties: { type: { const: "item" }, content: { type: "string" } },
      required: ["type", "content"],
      additionalProperties: false,
    },
    {
      type: "object",
      properties: { type: { const: "end" } },
      required: ["type"],
      additionalProperties: false,
    },
    {
      description:
        "A failure as an object of its own (only with ?errors=json); LangBot skips it.",
      type: "object",
      properties: {
        type: { const: "error" },
        content: { type: "string" },
        code: { type: "string" },
        retryable: { type: "boolean" },
      },
      required: ["type", "content", "code", "retryable"],
      additionalProperties: false,
    },
  ],
};

/** The non-streaming answer: one object, the answer under the output key. */
export function n8nAnswerSchema(outputKey = "response"): JsonSchema {
  return {
    $schema: "https://json-schema.org/draft/2020-12/schema",
    $id: `https://runner.invalid/contracts/n8n-answer/${outputKey}`,
    title: "n8n answer without streaming",
    type: "object",
    properties: { [outputKey]: { type: "string" } },
    required: [outputKey],
  };
}
