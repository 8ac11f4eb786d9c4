/**
 * LangBot's run result model (`RunnerResult` of LangBot's plugin SDK, pydantic
 * v2) as JSON Schema (2020-12): what a LangBot host accepts from a runner
 * plugin, from `daemon.py` and from `runner daemon` over `coding-relay-v1`.
 * Each known type's `data` follows the SDK's payload model, which forbids
 * keys it does not list. Where LangBot merely ignores unknown keys (the top
 * level, `Message`, `MessageChunk`) this schema refuses them too: the runner
 * sends only what LangBot reads. See `docs/contracts.md`.
 *
 * @module
 */

/** A JSON Schema, as a plain object. */
export type JsonSchema = SchemaObject | boolean;

/** A JSON Schema that is an object (not `true`/`false`). */
export type SchemaObject = Record<string, unknown>;

/** The `$id` of {@linkcode LANGBOT_RUN_RESULT_SCHEMA}. */
export const LANGBOT_RUN_RESULT_ID =
  "https://runner.invalid/contracts/langbot-run-result";

const nullable = (schema: JsonSchema): JsonSchema => ({
  anyOf: [schema, { type: "null" }],
});
const str = { type: "string" };
const int = { type: "integer" };
const obj = { type: "object" };

/** A closed object: `properties`, `required`, nothing else. */
function closed(
  properties: Record<string, JsonSchema>,
  required: string[] = [],
): SchemaObject {
  return { type: "object", properties, required, additionalProperties: false };
}

const contentElement = closed({
  type: str,
  text: nullable(str),
  image_url: nullable(closed({ url: str }, ["url"])),
  image_base64: nullable(str),
  file_url: nullable(str),
  file_base64: nullable(str),
  file_name: nullable(str),
}, ["type"]);

const content = {
  anyOf: [str, { type: "array", items: contentElement }, { type: "null" }],
};

const toolCalls = nullable({
  type: "array",
  items: closed({
    id: str,
    type: str,
    function: closed({ name: str, arguments: str }, ["name", "arguments"]),
  }, ["id", "type", "function"]),
});

const message = closed({
  role: str,
  name: nullable(str),
  content,
  tool_calls: toolCalls,
  tool_call_id: nullable(str),
  usage: nullable(obj),
}, ["role"]);

const messageChunk = closed({
  resp_message_id: nullable(str),
  role: str,
  name: nullable(str),
  all_content: nullable(str),
  content,
  tool_calls: toolCalls,
  tool_call_id: nullable(str),
  is_final: { type: "boolean" },
  msg_sequence: int,
}, ["role"]);

/**
 * `LLMTokenUsage`: the standard counters are whole numbers; other counters
 * are allowed, and held to whole numbers here too (a counter is one).
 */
const usage = nullable({
  type: "object",
  properties: {
    prompt_tokens: nullable(int),
    completion_tokens: nullable(int),
    total_tokens: nullable(int),
  },
  additionalProperties: nullable(int),
});

/** Each known type's payload model. */
export const LANGBOT_PAYLOADS: Readonly<Record<string, SchemaObject>> = {
  "message.delta": closed({ chunk: messageChunk }, ["chunk"]),
  "message.completed": closed({
    message,
    file_ids: { type: "array", items: str, maxItems: 100 },
  }, ["message"]),
  "tool.call.started": closed({
    tool_call_id: str,
    tool_name: str,
    parameters: obj,
  }, ["tool_call_id", "tool_name"]),
  "tool.call.completed": closed({
    tool_call_id: str,
    tool_name: str,
    result: nullable(obj),
    error: nullable(str),
  }, ["tool_call_id", "tool_name"]),
  "state.updated": closed({
    scope: { enum: ["conversation", "actor", "subject", "runner"] },
    key: str,
    value: true,
  }, ["scope", "key", "value"]),
  "action.requested": closed({
    action: str,
    target: nullable(obj),
    payload: nullable(obj),
  }, ["action"]),
  "run.completed": closed({
    finish_reason: str,
    message: nullable(message),
  }),
  "run.failed": closed({
    error: str,
    code: str,
    retryable: { type: "boolean" },
  }, ["error"]),
  "processor.log": closed({
    text: { type: "string", maxLength: 65536 },
    level: { enum: ["debug", "info", "warning", "error"] },
  }, ["text"]),
};

/** The keys each known type's payload allows. */
export function langbotPayloadKeys(
  type: string,
): readonly string[] | undefined {
  const payload = LANGBOT_PAYLOADS[type];
  return payload
    ? Object.keys(payload.properties as Record<string, unknown>)
    : undefined;
}

/**
 * One `RunnerResult` as LangBot validates it. `run_id` is required; on the
 * relay wire the hub fills it in, see {@linkcode LANGBOT_WIRE_EVENT_SCHEMA}.
 */
export const LANGBOT_RUN_RESULT_SCHEMA: SchemaObject = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  $id: LANGBOT_RUN_RESULT_ID,
  title: "LangBot RunnerResult",
  type: "object",
  properties: {
    run_id: str,
    type: str,
    data: obj,
    usage,
    sequence: nullable(int),
    timestamp: nullable({
      ...int,
      description: "Epoch seconds, a whole number.",
    }),
  },
  required: ["run_id", "type"],
  additionalProperties: false,
  allOf: Object.entries(LANGBOT_PAYLOADS).map(([type, payload]) => ({
    if: { properties: { type: { const: type } }, required: ["type"] },
    then: { properties: { data: payload } },
  })),
};

/** A `run.event` frame's `event`: a `RunnerResult` whose `run_id` the hub adds. */
export const LANGBOT_WIRE_EVENT_SCHEMA: SchemaObject = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  $id: `${LANGBOT_RUN_RESULT_ID}/wire`,
  title: "LangBot RunnerResult on the relay wire (run_id optional)",
  ...Object.fromEntries(
    Object.entries(LANGBOT_RUN_RESULT_SCHEMA).filter(([key]) =>
      !key.startsWith("$") && key !== "title" && key !== "required"
    ),
  ),
  required: ["type"],
};
