/**
 * The operations of `/openapi.json` for transcripts: a conversation's or a
 * run's transcript (Markdown or `runner-transcript` JSON) and importing one
 * (`docs/transcripts.md`).
 *
 * @module
 */

import { errors, json } from "./paths.ts";

type Schema = Record<string, unknown>;

const FORMAT: Schema = {
  name: "format",
  in: "query",
  description: "md (default): Markdown for a person; json: runner-transcript",
  schema: { type: "string", enum: ["md", "json"] },
};

const EVENT: Schema = {
  type: "object",
  required: ["run_id", "type", "data", "sequence", "timestamp"],
  properties: {
    run_id: { type: "string" },
    type: { type: "string" },
    data: { type: "object" },
    sequence: { type: "integer", minimum: 1 },
    timestamp: { type: "number" },
  },
};

const NULLABLE_STRING: Schema = { type: ["string", "null"] };

/** The `runner-transcript` v1 document. */
const TRANSCRIPT: Schema = {
  type: "object",
  required: ["format", "version", "exported_at", "conversation", "runs"],
  properties: {
    format: { const: "runner-transcript" },
    version: { const: 1 },
    exported_at: { type: "string", format: "date-time" },
    conversation: {
      type: "object",
      required: ["conversation_id", "usage"],
      properties: {
        conversation_id: NULLABLE_STRING,
        usage: { type: ["object", "null"] },
      },
    },
    runs: {
      type: "array",
      minItems: 1,
      items: {
        type: "object",
        required: [
          "run_id",
          "conversation_id",
          "status",
          "config",
          "created_at",
          "events",
        ],
        properties: {
          run_id: { type: "string" },
          conversation_id: NULLABLE_STRING,
          status: {
            type: "string",
            enum: ["active", "completed", "failed", "cancelled"],
          },
          config: { type: "object" },
          prompt: NULLABLE_STRING,
          code: NULLABLE_STRING,
          error: NULLABLE_STRING,
          created_at: { type: "string", format: "date-time" },
          updated_at: { type: "string", format: "date-time" },
          finished_at: NULLABLE_STRING,
          usage: { type: ["object", "null"] },
          events: { type: "array", items: EVENT },
        },
      },
    },
  },
};

function transcriptAnswer(): Schema {
  return {
    description:
      "The transcript: Markdown, or with format=json the runner-transcript document (Content-Disposition names a file)",
    content: {
      "text/markdown": { schema: { type: "string" } },
      "application/json": { schema: TRANSCRIPT },
    },
  };
}

const PATH_ID = (description: string): Schema => ({
  name: "id",
  in: "path",
  required: true,
  description,
  schema: { type: "string" },
});

/** The transcript routes. */
export function transcriptPaths(): Record<string, Schema> {
  return {
    "/v1/conversations/{id}/transcript": {
      get: {
        operationId: "getConversationTranscript",
        summary:
          "A conversation's runs as a transcript (prompts, answers, tool calls, plans, permission decisions, usage)",
        parameters: [PATH_ID("The conversation id"), FORMAT],
        responses: { "200": transcriptAnswer(), ...errors(400, 401, 404) },
      },
    },
    "/v1/runs/{id}/transcript": {
      get: {
        operationId: "getRunTranscript",
        summary: "One run as a transcript",
        parameters: [PATH_ID("The run id"), FORMAT],
        responses: { "200": transcriptAnswer(), ...errors(400, 401, 404) },
      },
    },
    "/v1/conversations/import": {
      post: {
        operationId: "importConversation",
        summary:
          "Store a runner-transcript document's runs here (all or nothing)",
        requestBody: {
          required: true,
          content: { "application/json": { schema: TRANSCRIPT } },
        },
        responses: {
          "201": json({
            type: "object",
            required: ["conversation_id", "run_ids", "events"],
            properties: {
              conversation_id: NULLABLE_STRING,
              run_ids: { type: "array", items: { type: "string" } },
              events: { type: "integer", minimum: 0 },
            },
          }, "Imported"),
          ...errors(400, 401, 409, 413),
        },
      },
    },
  };
}
