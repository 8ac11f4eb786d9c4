/**
 * The component schemas of `/openapi.json`: every JSON body the service
 * sends or takes. The run config's schema comes from its one description
 * (`config_schema.ts`).
 *
 * @module
 */

import { runConfigJsonSchema } from "./config.ts";
import { ERROR_CODES } from "../../errors.ts";
import { RUN_EVENT_TYPES } from "../../events.ts";

type Schema = Record<string, unknown>;

/** A `$ref` to a component schema. */
export const ref = (name: string): Schema => ({
  $ref: `#/components/schemas/${name}`,
});

const string = { type: "string" };
const nullableString = { type: ["string", "null"] };
const timestamp = {
  type: "string",
  format: "date-time",
  description: "ISO 8601, UTC.",
};
const RUN_STATUSES = ["active", "completed", "failed", "cancelled"];

/** The event types of `docs/events.md`. */
export const EVENT_TYPES = RUN_EVENT_TYPES;

function object(
  properties: Record<string, Schema>,
  required = Object.keys(properties),
): Schema {
  return { type: "object", required, properties };
}

/** The `terminal.*` events of client terminals (`docs/permissions.md`). */
function terminalEventData(): Schema[] {
  const id = { terminal_id: string };
  const flag = { type: "boolean" };
  const orNull = (type: string) => ({ type: [type, "null"] });
  return [
    eventData(
      "terminal.started",
      object({
        ...id,
        command: string,
        args: { type: "array", items: string },
        cwd: string,
      }),
    ),
    eventData(
      "terminal.output",
      object({ ...id, output: string, truncated: flag }),
    ),
    eventData(
      "terminal.exited",
      object({
        ...id,
        exit_code: orNull("integer"),
        signal: orNull("string"),
        truncated: flag,
        timed_out: flag,
      }),
    ),
  ];
}

/** `data` of the events of `type` must match `schema`. */
function eventData(type: string, schema: Schema): Schema {
  return {
    if: { properties: { type: { const: type } }, required: ["type"] },
    then: { properties: { data: schema } },
  };
}

/**
 * `run.started`: a warm or cold agent, and how it is confined
 * (`docs/sandbox.md`; absent from a daemon of a version before the sandbox).
 */
const RUN_STARTED_DATA = object({
  agent: { enum: ["warm", "cold"] },
  sandbox: { enum: ["off", "confined"] },
}, ["agent"]);

/** `turn.started`: a follow-up turn's number and input (attachments named only). */
const TURN_STARTED_DATA = object({
  turn: { type: "integer", minimum: 2 },
  input: object({
    text: string,
    attachments: {
      type: "array",
      items: object({ name: string, mime_type: string }, ["name"]),
    },
  }, ["text"]),
});

/** `agent.installing`: the download a run waits for (`docs/registry.md`). */
const AGENT_INSTALLING_DATA = object({
  id: string,
  version: string,
  received: { type: "integer", minimum: 0 },
  total: { type: "integer", minimum: 0 },
}, ["id", "version", "received"]);

/** The data of a run's and a follow-up turn's start. */
function startEvents(): Schema[] {
  return [
    eventData("agent.installing", AGENT_INSTALLING_DATA),
    eventData("run.started", RUN_STARTED_DATA),
    eventData("turn.started", TURN_STARTED_DATA),
  ];
}

/** `session.configured`: the session's values in force. */
function sessionConfiguredData(): Schema {
  return eventData(
    "session.configured",
    object({
      model: nullableString,
      mode: nullableString,
      config: {
        type: "object",
        description:
          "Every session config option in force, id → value (legacy mode and model included).",
        additionalProperties: { type: ["string", "boolean"] },
      },
      changed: { type: "array", items: string },
      remembered: {
        type: "array",
        items: string,
        description:
          "The names whose wanted value the conversation remembered from an earlier run (the run asked none for them).",
      },
    }, ["model", "mode", "config"]),
  );
}

const tokenCount = { type: "integer", minimum: 0 };

/** `Usage`: tokens in LangBot's names, the context window and the cost. */
function usageSchema(): Schema {
  return {
    type: "object",
    description:
      "Token usage in LangBot's names (docs/events.md): the agent's counts of each turn (ACP PromptResponse.usage) added up, and the last context window (used, size) and cost it reported. A counter the agent did not report is absent, never 0.",
    properties: {
      prompt_tokens: tokenCount,
      completion_tokens: tokenCount,
      total_tokens: tokenCount,
      cached_read_tokens: tokenCount,
      cached_write_tokens: tokenCount,
      thought_tokens: tokenCount,
      used: { ...tokenCount, description: "Tokens in context." },
      size: { ...tokenCount, description: "The context window's size." },
      cost: {
        type: "object",
        required: ["amount", "currency"],
        properties: {
          amount: { type: "number", minimum: 0 },
          currency: string,
        },
      },
    },
    additionalProperties: false,
  };
}

/** `RunEvent` and the `Message` of its completions. */
function eventSchemas(): Record<string, Schema> {
  return {
    Usage: usageSchema(),
    RunEvent: {
      ...object({
        run_id: string,
        type: { type: "string", enum: EVENT_TYPES },
        data: { type: "object" },
        usage: ref("Usage"),
        sequence: { type: "integer", minimum: 1 },
        timestamp: {
          type: "integer",
          description: "Milliseconds since the epoch.",
        },
      }, ["run_id", "type", "data"]),
      description:
        "One run event (docs/events.md). message.completed carries the whole text; run.completed carries a message only where no message.completed did (e.g. from an older daemon), so a stream holds the answer at most twice (deltas and completion); with completions=lean, a completion whose text its deltas carried leaves it out (message.completed's message is then {role} and run.completed has no message), so such events do not match the data schemas below.",
      allOf: [
        eventData("message.completed", object({ message: ref("Message") })),
        eventData(
          "run.completed",
          object({ finish_reason: string, message: ref("Message") }, [
            "finish_reason",
          ]),
        ),
        eventData(
          "message.delta",
          object({
            chunk: object({
              role: { const: "assistant" },
              content: string,
              all_content: string,
              msg_sequence: { type: "integer", minimum: 1 },
            }, ["role", "content", "msg_sequence"]),
          }),
        ),
        eventData("thought.delta", object({ content: string })),
        eventData(
          "tool.call.started",
          object({ tool_call_id: string, tool_name: string }),
        ),
        eventData(
          "tool.call.updated",
          object({ tool_call_id: string }),
        ),
        eventData(
          "tool.call.completed",
          object({ tool_call_id: string, tool_name: string }),
        ),
        eventData(
          "state.updated",
          object({ scope: string, key: string, value: {} }),
        ),
        eventData(
          "run.failed",
          object({
            error: string,
            code: string,
            retryable: { type: "boolean" },
          }),
        ),
        eventData(
          "permission.decided",
          object({ request_id: string, decision: string, by: string }),
        ),
        ...startEvents(),
        ...terminalEventData(),
        sessionConfiguredData(),
      ],
    },
    Message: object({
      role: { const: "assistant" },
      content: {
        ...string,
        description: "The whole text of the message (the deltas joined).",
      },
    }),
  };
}

function runSchemas(): Record<string, Schema> {
  const summary = {
    run_id: string,
    conversation_id: nullableString,
    status: { type: "string", enum: RUN_STATUSES },
    active: { type: "boolean" },
    code: nullableString,
    error: nullableString,
    config: {
      type: "object",
      description:
        "The run's resolved config (kebab-case keys of docs/config.md); env-json values read [REDACTED].",
    },
    prompt: {
      ...nullableString,
      description:
        "The first input's text, its first 200 characters (secrets redacted); null without text.",
    },
    created_at: timestamp,
    updated_at: timestamp,
    finished_at: { ...timestamp, type: ["string", "null"] },
    usage: {
      oneOf: [ref("Usage"), { type: "null" }],
      description:
        "What the agent reported (the terminal event's usage), or null: none reported, or the run is active.",
    },
  };
  return {
    ...eventSchemas(),
    RunInput: {
      type: "object",
      properties: {
        text: string,
        attachments: { type: "array", items: { type: "object" } },
      },
    },
    RunConfig: runConfigJsonSchema(),
    RunSummary: object(summary),
    Run: object({
      ...summary,
      events: { type: "array", items: ref("RunEvent") },
    }),
    RunDocument: object({
      run_id: string,
      conversation_id: nullableString,
      status: { type: "string", enum: RUN_STATUSES },
      code: nullableString,
      error: nullableString,
      message: { ...string, description: "The final assistant message." },
      usage: ref("Usage"),
      events: { type: "array", items: ref("RunEvent") },
    }, [
      "run_id",
      "conversation_id",
      "status",
      "code",
      "error",
      "message",
      "events",
    ]),
    RunEvents: object({
      run_id: string,
      status: { type: "string", enum: RUN_STATUSES },
      events: { type: "array", items: ref("RunEvent") },
    }),
    RunList: object({ runs: { type: "array", items: ref("RunSummary") } }),
    Steered: object({ run_id: string, steered: { const: true } }),
    Queued: object({ run_id: string, queued: { const: true } }),
    Cancelled: object({ run_id: string, status: string, code: nullableString }),
    PermissionAnswered: object({
      run_id: string,
      request_id: string,
      answered: { const: true },
    }),
  };
}

function serviceSchemas(): Record<string, Schema> {
  return {
    Error: object({
      error: object({
        code: { type: "string", enum: Object.keys(ERROR_CODES) },
        message: string,
        retryable: { type: "boolean" },
      }),
    }),
    Health: object({
      status: {
        ...string,
        description:
          "`ok`, or `shutting_down` or `degraded` (the store cannot be read or written; in a fleet, the database cannot be reached), both with 503.",
      },
      version: string,
      active_runs: { type: "integer", minimum: 0 },
      store: object({ ok: { type: "boolean" }, error: string }, ["ok"]),
      replica_id: {
        ...string,
        description: "This replica's id, in a fleet (`--store postgres://…`).",
      },
    }, ["status", "version", "active_runs", "store"]),
    Providers: object({
      presets: {
        type: "array",
        items: object({
          name: string,
          command: string,
          recovery: { type: "array", items: string },
          envNames: { type: "array", items: string },
        }, ["name", "command", "recovery"]),
      },
      unsupported: {
        type: "array",
        items: object({
          name: string,
          reason: string,
          suggestedCommand: string,
        }, ["name", "reason"]),
      },
    }),
    Daemons: object({
      daemons: {
        type: "array",
        items: object({
          daemon_id: string,
          connected: { type: "boolean" },
          fenced: { type: "boolean" },
          metadata: { type: "object" },
          connected_at: { type: ["integer", "null"] },
          last_seen_at: { type: ["integer", "null"] },
          active_jobs: { type: "array", items: string },
        }),
      },
    }),
    Unfenced: object({ daemon_id: string, was_fenced: { type: "boolean" } }),
  };
}

/** `GET`/`DELETE /v1/conversations/{id}`: a conversation's stored sessions. */
function conversationSchemas(): Record<string, Schema> {
  return {
    Conversation: object({
      conversation_id: string,
      active_run_id: nullableString,
      sessions: {
        type: "array",
        items: object({
          session_id: string,
          provider: string,
          location: string,
          target: string,
          workspace: string,
          agent_command: string,
          updated_at: timestamp,
          settings: {
            type: ["object", "null"],
            description:
              "The session config values the conversation remembers with this session (`model`, `mode`, `config`), or null.",
          },
        }),
      },
      runs: {
        type: "integer",
        minimum: 0,
        description: "The conversation's stored runs.",
      },
      usage: {
        type: ["object", "null"],
        description:
          "What the conversation's runs used, added up from each run's usage (docs/events.md): the token counters, `runs` (how many reported any) and `costs` per currency; null when none reported any.",
        required: ["runs", "costs"],
        properties: {
          prompt_tokens: tokenCount,
          completion_tokens: tokenCount,
          total_tokens: tokenCount,
          cached_read_tokens: tokenCount,
          cached_write_tokens: tokenCount,
          thought_tokens: tokenCount,
          runs: tokenCount,
          costs: {
            type: "array",
            items: object({
              amount: { type: "number", minimum: 0 },
              currency: string,
            }),
          },
        },
        additionalProperties: false,
      },
    }),
    ConversationForgotten: object({
      conversation_id: string,
      deleted_sessions: { type: "integer", minimum: 0 },
    }),
  };
}

/** `GET`/`DELETE /v1/agents`: the warm pool. */
function warmAgentSchemas(): Record<string, Schema> {
  return {
    WarmAgents: object({
      agents: {
        type: "array",
        description:
          "Least recently used first; in a fleet each replica's in turn, this one's first.",
        items: object({
          agent_id: string,
          conversation_id: string,
          provider: string,
          location: string,
          session_id: string,
          idle_since: timestamp,
          replica_id: {
            ...string,
            description: "In a fleet: the replica that keeps the agent.",
          },
        }, [
          "agent_id",
          "conversation_id",
          "provider",
          "location",
          "session_id",
          "idle_since",
        ]),
      },
    }),
    WarmAgentStopped: object({ agent_id: string, stopped: { const: true } }),
  };
}

function n8nSchemas(): Record<string, Schema> {
  return {
    N8nRequest: {
      type: "object",
      description:
        "What LangBot's n8n runner sends; the text is chatInput, message or user_message_text; other fields are ignored.",
      properties: {
        chatInput: string,
        message: string,
        user_message_text: string,
        conversation_id: string,
        session_id: string,
        user_id: string,
      },
    },
    N8nStreamObject: {
      description:
        "One line of the webhook stream: text items, then end (an error object only with ?errors=json).",
      oneOf: [
        object({ type: { const: "item" }, content: string }),
        object({ type: { const: "end" } }),
        object({
          type: { const: "error" },
          content: string,
          code: string,
          retryable: { type: "boolean" },
        }),
      ],
    },
    N8nAnswer: {
      type: "object",
      required: ["run_id"],
      description:
        "The stream=false answer: the text under the --n8n-output-key key (default response); a failed run's readable failure, with error.",
      properties: {
        run_id: string,
        error: object({
          code: string,
          message: string,
          retryable: { type: "boolean" },
        }),
        usage: ref("Usage"),
      },
      additionalProperties: string,
    },
  };
}

/** Every component schema of the document. */
export function componentSchemas(): Record<string, Schema> {
  return {
    ...serviceSchemas(),
    ...conversationSchemas(),
    ...runSchemas(),
    ...warmAgentSchemas(),
    ...n8nSchemas(),
  };
}
