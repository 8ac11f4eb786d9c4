/**
 * The operations of `/openapi.json`: every route with its operation id,
 * parameters, request body, and each status it answers with, its content
 * types and headers.
 *
 * @module
 */

import { ref } from "./schemas.ts";

type Schema = Record<string, unknown>;

const param = (name: string): Schema => ({
  $ref: `#/components/parameters/${name}`,
});
const header = (name: string): Schema => ({
  $ref: `#/components/headers/${name}`,
});

const ERROR_DESCRIPTIONS: Record<number, string> = {
  400:
    "Invalid request or run config (`http.bad_request`, `config.invalid`, `provider.*`, `prompt.attachment_invalid`).",
  401: "Missing or wrong credentials (`http.unauthorized`).",
  403: "A run setting the operator did not allow (`http.forbidden`).",
  404:
    "Unknown run, conversation, daemon hub or idle warm agent (`http.not_found`).",
  409:
    "The run or conversation does not allow this now (`http.conflict`, `http.conversation_busy`).",
  413:
    "Body larger than `--max-body-mb` (`http.body_too_large`) or an attachment over its limit (`prompt.attachment_too_large`).",
  429:
    "Too many active runs (`http.too_many_runs`, with Retry-After) or a full steering queue (`run.steering_queue_full`).",
  502: "The run failed (n8n `stream=false` with `errors=json`).",
  503:
    "The runner is shutting down (`runner.shutting_down`), its store is unavailable (`store.unavailable`), or in a fleet the replica owning the request did not answer (`runner.replica_unreachable`).",
};

const ERROR_HEADERS: Record<number, Record<string, Schema>> = {
  401: { "WWW-Authenticate": header("WWWAuthenticate") },
  429: { "Retry-After": header("RetryAfter") },
};

/** Error responses in the one error shape, for `statuses`, plus `default`. */
export function errors(...statuses: number[]): Record<string, Schema> {
  const error = { "application/json": { schema: ref("Error") } };
  return {
    ...Object.fromEntries(statuses.map((status) => [String(status), {
      description: ERROR_DESCRIPTIONS[status] ?? "Error",
      ...(ERROR_HEADERS[status] ? { headers: ERROR_HEADERS[status] } : {}),
      content: error,
    }])),
    default: { description: "An unexpected failure.", content: error },
  };
}

/** A JSON response. */
export function json(
  schema: Schema,
  description = "OK",
  headers?: Schema,
): Schema {
  return {
    description,
    ...(headers ? { headers } : {}),
    content: { "application/json": { schema } },
  };
}

/** The 200 of a run's events: SSE, NDJSON, or one JSON document with stream=false. */
function eventStream(document: string, withRunId: boolean): Schema {
  return {
    description:
      "The run's events (each as x-item-schema): SSE (`event:` the type, `id:` the sequence, `retry:` first), NDJSON with `Accept: application/x-ndjson`, or one JSON document with `stream=false`. Keep-alives while the agent is silent.",
    ...(withRunId ? { headers: { "X-Run-Id": header("XRunId") } } : {}),
    content: {
      "text/event-stream": {
        schema: { type: "string" },
        "x-item-schema": ref("RunEvent"),
      },
      "application/x-ndjson": {
        schema: { type: "string" },
        "x-item-schema": ref("RunEvent"),
      },
      "application/json": { schema: ref(document) },
    },
  };
}

const jsonBody = (schema: Schema) => ({
  required: true,
  content: { "application/json": { schema } },
});

/** `/healthz`, `/metrics` and `/openapi.json`: open to all, no token. */
export function metaPaths(): Record<string, Schema> {
  return {
    "/healthz": {
      get: {
        operationId: "getHealth",
        summary: "Liveness",
        security: [],
        responses: {
          "200": json(ref("Health")),
          "503": json(ref("Health"), "Shutting down, or degraded"),
        },
      },
    },
    "/metrics": {
      get: {
        operationId: "getMetrics",
        summary: "Prometheus metrics (text exposition format 0.0.4)",
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
        operationId: "getOpenApi",
        summary: "This document",
        security: [],
        responses: { "200": json({ type: "object" }) },
      },
    },
  };
}

/** `/v1/runs`: start a run, list runs. */
export function runCollectionPaths(): Record<string, Schema> {
  return {
    "/v1/runs": {
      post: {
        operationId: "startRun",
        summary:
          "Start a run (or steer the conversation's active run); a repeated run_id or Idempotency-Key re-attaches",
        parameters: [
          param("Stream"),
          param("AllContent"),
          param("Completions"),
          param("IdempotencyKey"),
          param("LastEventId"),
        ],
        requestBody: jsonBody({
          type: "object",
          required: ["input"],
          properties: {
            run_id: { type: "string" },
            conversation_id: { type: "string" },
            input: {
              oneOf: [ref("RunInput"), {
                type: "string",
                description: "The text alone.",
              }],
            },
            config: ref("RunConfig"),
            assets: { type: "object", description: "docs/assets.md" },
            stream: { type: "boolean" },
            all_content: {
              type: "boolean",
              description: "Like ?all_content=true (the query wins).",
            },
            completions: {
              type: "string",
              enum: ["full", "lean"],
              description: "Like ?completions= (the query wins).",
            },
          },
        }),
        responses: {
          "200": eventStream("RunDocument", true),
          "202": json(ref("Steered"), "Steered into the active run"),
          ...errors(400, 401, 403, 409, 413, 429, 503),
        },
      },
      get: {
        operationId: "listRuns",
        summary: "Recent runs, newest first",
        parameters: listRunsParameters(),
        responses: { "200": json(ref("RunList")), ...errors(400, 401) },
      },
    },
  };
}

/** The query parameters of `GET /v1/runs`: filters and paging. */
function listRunsParameters(): Schema[] {
  return [
    {
      name: "conversation_id",
      in: "query",
      schema: { type: "string" },
    },
    {
      name: "status",
      in: "query",
      schema: {
        type: "string",
        enum: ["active", "completed", "failed", "cancelled"],
      },
    },
    {
      name: "daemon_id",
      in: "query",
      description: "Only runs whose config names this daemon-id",
      schema: { type: "string" },
    },
    {
      name: "before",
      in: "query",
      description:
        "Only runs older than this run: the run_id of the last run of the previous page",
      schema: { type: "string" },
    },
    {
      name: "limit",
      in: "query",
      schema: { type: "integer", minimum: 1, maximum: 1000, default: 50 },
    },
  ];
}

/** `/v1/runs/{id}…`: read one run, resume its events, steer or cancel it. */
export function singleRunPaths(): Record<string, Schema> {
  return {
    "/v1/runs/{id}": {
      get: {
        operationId: "getRun",
        summary: "A run with its events so far",
        parameters: [
          param("RunId"),
          param("AllContent"),
          param("Completions"),
        ],
        responses: { "200": json(ref("Run")), ...errors(400, 401, 404) },
      },
    },
    "/v1/runs/{id}/events": {
      get: {
        operationId: "getRunEvents",
        summary:
          "A run's events after the larger of ?after= and Last-Event-ID; 204 once a finished run has nothing left",
        parameters: [
          param("RunId"),
          param("After"),
          param("LastEventId"),
          param("Stream"),
          param("AllContent"),
          param("Completions"),
        ],
        responses: {
          "200": eventStream("RunEvents", false),
          "204": { description: "The run ended and everything was delivered." },
          ...errors(400, 401, 404),
        },
      },
    },
    "/v1/runs/{id}/input": {
      post: {
        operationId: "sendRunInput",
        summary: "Queue a follow-up on an active run",
        parameters: [param("RunId")],
        requestBody: jsonBody({
          type: "object",
          properties: {
            input: ref("RunInput"),
            text: { type: "string" },
            attachments: { type: "array", items: { type: "object" } },
          },
        }),
        responses: {
          "202": json(ref("Queued"), "Queued"),
          ...errors(400, 401, 404, 409, 413, 429),
        },
      },
    },
    "/v1/runs/{id}/cancel": {
      post: {
        operationId: "cancelRun",
        summary: "Cancel a run; answers after its terminal event",
        parameters: [param("RunId")],
        responses: { "200": json(ref("Cancelled")), ...errors(401, 404, 413) },
      },
    },
  };
}

/** Providers, daemons and stored conversations. */
export function operatorPaths(): Record<string, Schema> {
  const daemonId = {
    name: "id",
    in: "path",
    required: true,
    schema: { type: "string" },
  };
  const conversationId = param("ConversationId");
  return {
    "/v1/providers": {
      get: {
        operationId: "listProviders",
        summary: "Provider presets and known agents that are not presets",
        responses: { "200": json(ref("Providers")), ...errors(401) },
      },
    },
    "/v1/daemons": {
      get: {
        operationId: "listDaemons",
        summary: "Connected and fenced daemons with metadata and active jobs",
        responses: { "200": json(ref("Daemons")), ...errors(401) },
      },
    },
    "/v1/daemons/{id}/unfence": {
      post: {
        operationId: "unfenceDaemon",
        summary:
          "Lift a daemon fence (only after verifying nothing still runs on that machine)",
        parameters: [daemonId],
        responses: {
          "200": json(ref("Unfenced")),
          ...errors(401, 404, 413),
        },
      },
    },
    "/v1/conversations/{id}": {
      get: {
        operationId: "getConversation",
        summary: "Stored sessions and the active run of a conversation",
        parameters: [conversationId],
        responses: {
          "200": json(ref("Conversation")),
          ...errors(400, 401, 404),
        },
      },
      delete: {
        operationId: "forgetConversation",
        summary: "Forget a conversation's sessions",
        parameters: [conversationId],
        responses: {
          "200": json(ref("ConversationForgotten")),
          ...errors(400, 401, 409),
        },
      },
    },
  };
}

/** `/v1/agents`: the warm pool (`docs/runs.md`, "Warm agents"). */
export function warmAgentPaths(): Record<string, Schema> {
  return {
    "/v1/agents": {
      get: {
        operationId: "listWarmAgents",
        summary:
          "Warm agents idle between a conversation's runs (conversation, provider, idle since)",
        responses: { "200": json(ref("WarmAgents")), ...errors(401) },
      },
    },
    "/v1/agents/{id}": {
      delete: {
        operationId: "stopWarmAgent",
        summary:
          "Stop an idle warm agent (the conversation's next run starts cold)",
        parameters: [{
          name: "id",
          in: "path",
          required: true,
          schema: { type: "string" },
        }],
        responses: {
          "200": json(ref("WarmAgentStopped")),
          ...errors(401, 404),
        },
      },
    },
  };
}

/** `/v1/webhooks/n8n`. */
export function n8nPaths(): Record<string, Schema> {
  return {
    "/v1/webhooks/n8n": {
      post: {
        operationId: "n8nWebhook",
        summary:
          "n8n-webhook-compatible run (for LangBot's n8n runner); query parameters set run-config keys",
        // --n8n-auth none: the API token (bearer), like every /v1 route.
        security: [
          { bearer: [] },
          { n8nBasic: [] },
          { n8nHeader: [] },
        ],
        parameters: [param("Stream"), {
          name: "errors",
          in: "query",
          description:
            "item (default): a failure is a readable item; json: an error object (and 502 with stream=false).",
          schema: { type: "string", enum: ["item", "json"], default: "item" },
        }],
        requestBody: jsonBody(ref("N8nRequest")),
        responses: {
          "200": {
            description:
              "JSON objects, one per line (each as x-item-schema): items, then end, newlines as keep-alive; with stream=false one N8nAnswer object after leading newlines.",
            headers: { "X-Run-Id": header("XRunId") },
            content: {
              "application/json": {
                schema: ref("N8nAnswer"),
                "x-item-schema": ref("N8nStreamObject"),
              },
            },
          },
          ...errors(400, 401, 403, 409, 413, 429, 502, 503),
        },
      },
    },
  };
}
