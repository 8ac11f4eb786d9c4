/**
 * The OpenAPI 3.1 description of `runner serve`, served at `/openapi.json`.
 *
 * @module
 */

import { RUN_CONFIG_KEYS } from "../config.ts";
import { RUNNER_VERSION } from "../version.ts";

type Schema = Record<string, unknown>;

const ref = (name: string): Schema => ({
  $ref: `#/components/schemas/${name}`,
});

function errors(...statuses: number[]): Record<string, Schema> {
  return Object.fromEntries(statuses.map((status) => [
    String(status),
    {
      description: ERROR_DESCRIPTIONS[status] ?? "Error",
      content: { "application/json": { schema: ref("Error") } },
    },
  ]));
}

const ERROR_DESCRIPTIONS: Record<number, string> = {
  400:
    "Invalid request or run config (`http.bad_request`, `config.invalid`, `provider.*`).",
  401: "Missing or wrong API token (`http.unauthorized`).",
  403: "A run setting the operator did not allow (`http.forbidden`).",
  404: "Unknown run or conversation (`http.not_found`).",
  409:
    "The run or conversation does not allow this now (`http.conflict`, `http.conversation_busy`).",
  413: "Body larger than `--max-body-mb` (`http.body_too_large`).",
  429:
    "Too many active runs (`http.too_many_runs`, with Retry-After) or steering queue full.",
  502: "The run failed (n8n `stream=false`).",
  503: "The runner is shutting down (`runner.shutting_down`).",
};

const json = (schema: Schema, description = "OK") => ({
  description,
  content: { "application/json": { schema } },
});

const runIdParam = {
  name: "id",
  in: "path",
  required: true,
  schema: { type: "string" },
};
const streamParam = {
  name: "stream",
  in: "query",
  schema: { type: "boolean" },
  description: "false: answer with one JSON document after the run ends.",
};

const eventStream = {
  description:
    "The run's events: SSE (`event:` type, `id:` sequence) or NDJSON with `Accept: application/x-ndjson`.",
  content: {
    "text/event-stream": { schema: { type: "string" } },
    "application/x-ndjson": { schema: ref("RunEvent") },
  },
};

/** The OpenAPI document of every route. */
export function openApiDocument(): Record<string, unknown> {
  return {
    openapi: "3.1.0",
    info: {
      title: "runner",
      version: RUNNER_VERSION,
      description:
        "Runs ACP coding agents for a control plane. See docs/http-api.md.",
    },
    servers: [{ url: "/" }],
    security: [{ bearer: [] }],
    components: {
      securitySchemes: { bearer: { type: "http", scheme: "bearer" } },
      schemas: componentSchemas(),
    },
    paths: {
      ...metaPaths(),
      ...runCollectionPaths(),
      ...singleRunPaths(),
      ...permissionPaths(),
      ...operatorPaths(),
      ...n8nPaths(),
    },
  };
}

function componentSchemas(): Record<string, Schema> {
  const configProperties = Object.fromEntries(
    Object.keys(RUN_CONFIG_KEYS).map((key) => [key, {}]),
  );
  return {
    Error: {
      type: "object",
      required: ["error"],
      properties: {
        error: {
          type: "object",
          required: ["code", "message", "retryable"],
          properties: {
            code: { type: "string" },
            message: { type: "string" },
            retryable: { type: "boolean" },
          },
        },
      },
    },
    RunEvent: {
      type: "object",
      required: ["run_id", "type", "data"],
      properties: {
        run_id: { type: "string" },
        type: { type: "string" },
        data: { type: "object" },
        usage: { type: "object" },
        sequence: { type: "integer" },
        timestamp: { type: "integer" },
      },
    },
    RunInput: {
      type: "object",
      properties: {
        text: { type: "string" },
        attachments: { type: "array", items: { type: "object" } },
      },
    },
    RunConfig: {
      type: "object",
      description:
        "Kebab-case run-config keys (docs/config.md); server defaults fill the rest.",
      properties: configProperties,
    },
    Run: {
      type: "object",
      properties: {
        run_id: { type: "string" },
        conversation_id: { type: ["string", "null"] },
        status: {
          type: "string",
          enum: ["active", "completed", "failed", "cancelled"],
        },
        active: { type: "boolean" },
        code: { type: ["string", "null"] },
        error: { type: ["string", "null"] },
        config: { type: "object" },
        events: { type: "array", items: ref("RunEvent") },
      },
    },
  };
}

/** `/healthz`, `/metrics` and `/openapi.json`: open to all, no token. */
function metaPaths(): Record<string, Schema> {
  return {
    "/healthz": {
      get: {
        summary: "Liveness",
        security: [],
        responses: { "200": json({ type: "object" }), ...errors(503) },
      },
    },
    "/metrics": {
      get: {
        summary: "Prometheus metrics",
        security: [],
        responses: {
          "200": {
            description: "Prometheus text",
            content: { "text/plain": { schema: { type: "string" } } },
          },
        },
      },
    },
    "/openapi.json": {
      get: {
        summary: "This document",
        security: [],
        responses: { "200": json({ type: "object" }) },
      },
    },
  };
}

/** `/v1/runs`: start a run, list runs. */
function runCollectionPaths(): Record<string, Schema> {
  return {
    "/v1/runs": {
      post: {
        summary: "Start a run (or steer the conversation's active run)",
        parameters: [streamParam],
        requestBody: {
          required: true,
          content: {
            "application/json": {
              schema: {
                type: "object",
                required: ["input"],
                properties: {
                  run_id: { type: "string" },
                  conversation_id: { type: "string" },
                  input: ref("RunInput"),
                  config: ref("RunConfig"),
                  stream: { type: "boolean" },
                },
              },
            },
          },
        },
        responses: {
          "200": eventStream,
          "202": json({
            type: "object",
            properties: {
              run_id: { type: "string" },
              steered: { type: "boolean" },
            },
          }, "Steered"),
          ...errors(400, 401, 403, 413, 429, 503),
        },
      },
      get: {
        summary: "Recent runs",
        parameters: [
          {
            name: "conversation_id",
            in: "query",
            schema: { type: "string" },
          },
          { name: "status", in: "query", schema: { type: "string" } },
          { name: "limit", in: "query", schema: { type: "integer" } },
        ],
        responses: {
          "200": json({
            type: "object",
            properties: { runs: { type: "array", items: ref("Run") } },
          }),
          ...errors(400, 401),
        },
      },
    },
  };
}

/** `/v1/runs/{id}…`: read one run, resume its events, steer or cancel it. */
function singleRunPaths(): Record<string, Schema> {
  return {
    "/v1/runs/{id}": {
      get: {
        summary: "A run with its events so far",
        parameters: [runIdParam],
        responses: { "200": json(ref("Run")), ...errors(401, 404) },
      },
    },
    "/v1/runs/{id}/events": {
      get: {
        summary: "Resume reading a run's events (honours Last-Event-ID)",
        parameters: [runIdParam, {
          name: "after",
          in: "query",
          schema: { type: "integer" },
        }, streamParam],
        responses: { "200": eventStream, ...errors(400, 401, 404) },
      },
    },
    "/v1/runs/{id}/input": {
      post: {
        summary: "Queue a follow-up on an active run",
        parameters: [runIdParam],
        requestBody: {
          required: true,
          content: {
            "application/json": {
              schema: {
                type: "object",
                properties: { input: ref("RunInput") },
              },
            },
          },
        },
        responses: {
          "202": json({ type: "object" }, "Queued"),
          ...errors(400, 401, 404, 409, 429),
        },
      },
    },
    "/v1/runs/{id}/cancel": {
      post: {
        summary: "Cancel a run",
        parameters: [runIdParam],
        responses: { "200": json({ type: "object" }), ...errors(401, 404) },
      },
    },
  };
}

/** Providers, daemons and stored conversations. */
function operatorPaths(): Record<string, Schema> {
  return {
    "/v1/providers": {
      get: {
        summary: "Provider presets",
        responses: { "200": json({ type: "object" }), ...errors(401) },
      },
    },
    "/v1/daemons": {
      get: {
        summary: "Connected and fenced daemons with metadata and active jobs",
        responses: { "200": json({ type: "object" }), ...errors(401) },
      },
    },
    "/v1/daemons/{id}/unfence": {
      post: {
        summary:
          "Lift a daemon fence (only after verifying nothing still runs on that machine)",
        parameters: [runIdParam],
        responses: { "200": json({ type: "object" }), ...errors(401, 404) },
      },
    },
    "/v1/conversations/{id}": {
      get: {
        summary: "Stored sessions of a conversation",
        parameters: [runIdParam],
        responses: { "200": json({ type: "object" }), ...errors(401, 404) },
      },
      delete: {
        summary: "Forget a conversation's sessions",
        parameters: [runIdParam],
        responses: { "200": json({ type: "object" }), ...errors(401, 409) },
      },
    },
  };
}

/** `/v1/webhooks/n8n`. */
function n8nPaths(): Record<string, Schema> {
  return {
    "/v1/webhooks/n8n": {
      post: {
        summary: "n8n-webhook-compatible run (for LangBot's n8n runner)",
        parameters: [streamParam],
        requestBody: {
          required: true,
          content: {
            "application/json": {
              schema: {
                type: "object",
                properties: {
                  chatInput: { type: "string" },
                  message: { type: "string" },
                  user_message_text: { type: "string" },
                  conversation_id: { type: "string" },
                  session_id: { type: "string" },
                  user_id: { type: "string" },
                },
              },
            },
          },
        },
        responses: {
          "200": {
            description:
              'Concatenated JSON objects {"type":"item","content":…} … {"type":"end"}, or one object with stream=false',
            content: { "application/json": { schema: { type: "object" } } },
          },
          ...errors(400, 401, 403, 409, 429, 502),
        },
      },
    },
  };
}

function permissionPaths(): Record<string, Schema> {
  return {
    "/": {
      get: {
        summary:
          "The operator console (an HTML page; its data comes from /v1 with the same auth)",
        responses: {
          "200": {
            description: "The console page",
            content: { "text/html": { schema: { type: "string" } } },
          },
        },
      },
    },
    "/v1/runs/{id}/permissions/{request_id}": {
      post: {
        summary: "Answer a permission request (permission-decision=ask)",
        parameters: [runIdParam, {
          name: "request_id",
          in: "path",
          required: true,
          schema: { type: "string" },
        }],
        requestBody: {
          required: true,
          content: {
            "application/json": {
              schema: {
                type: "object",
                properties: {
                  option_id: { type: "string" },
                  decision: {
                    type: "string",
                    enum: [
                      "allow_once",
                      "allow_always",
                      "reject_once",
                      "reject_always",
                    ],
                  },
                },
              },
            },
          },
        },
        responses: {
          "200": json({ type: "object" }, "Answered"),
          ...errors(400, 401, 404, 409),
        },
      },
    },
  };
}
