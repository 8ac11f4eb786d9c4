/**
 * Every `coding-relay-v1` frame, as JSON Schema (2020-12), by direction: the
 * frames LangBot's Python hub and `daemon.py` exchange (LangBot's facts of the
 * protocol and its recorded transcripts) plus the runner's optional
 * extensions (`capabilities`, `run.permission`, a `run.event`'s `runner`
 * details), which Python peers ignore. A `run.event`'s `event` is LangBot's
 * `RunnerResult` (`langbot_result.ts`). See `docs/contracts.md`.
 *
 * @module
 */

import {
  type JsonSchema,
  LANGBOT_WIRE_EVENT_SCHEMA,
} from "./langbot_result.ts";

const str = { type: "string" };
const nonEmpty = { type: "string", minLength: 1 };

function frame(
  type: string,
  properties: Record<string, JsonSchema>,
  required: string[],
): JsonSchema {
  return {
    type: "object",
    properties: { type: { const: type }, ...properties },
    required: ["type", ...required],
    additionalProperties: false,
  };
}

const json = true;

/**
 * The runner's details of a `run.event` that LangBot's model has no room
 * for: the event's time in milliseconds and the `data` keys (the runner's
 * codes, ACP stop reason, tool kinds, …) that the wire's event leaves out or
 * spells LangBot's way, and the usage beside the token counters (context
 * window, cost). Our hub merges them back; Python hubs ignore them.
 */
const runnerDetails = {
  type: "object",
  properties: {
    timestamp_ms: { type: "integer" },
    data: { type: "object" },
    usage: {
      type: "object",
      properties: {
        used: { type: "integer", minimum: 0 },
        size: { type: "integer", minimum: 0 },
        cost: {
          type: "object",
          properties: {
            amount: { type: "number", minimum: 0 },
            currency: { type: "string" },
          },
          required: ["amount", "currency"],
          additionalProperties: false,
        },
      },
      additionalProperties: false,
    },
  },
  additionalProperties: false,
};

/** Frames a daemon sends to a hub. */
export const DAEMON_FRAME_SCHEMAS: Readonly<Record<string, JsonSchema>> = {
  "daemon.hello": frame("daemon.hello", {
    daemon_id: str,
    protocol: str,
    token: str,
    metadata: { type: "object" },
  }, ["daemon_id", "protocol"]),
  "run.event": frame("run.event", {
    job_id: nonEmpty,
    event: LANGBOT_WIRE_EVENT_SCHEMA,
    runner: runnerDetails,
  }, ["job_id", "event"]),
  "run.update": frame("run.update", {
    job_id: nonEmpty,
    update: {
      type: "object",
      properties: { sessionUpdate: str },
      required: ["sessionUpdate"],
    },
  }, ["job_id", "update"]),
  "mcp.request": frame("mcp.request", {
    request_id: nonEmpty,
    job_id: nonEmpty,
    payload: json,
  }, ["request_id", "job_id", "payload"]),
  "run.finished": frame("run.finished", { job_id: nonEmpty }, ["job_id"]),
  "daemon.ping": frame("daemon.ping", {}, []),
};

/** Frames a hub sends to a daemon. */
export const HUB_FRAME_SCHEMAS: Readonly<Record<string, JsonSchema>> = {
  "daemon.ready": frame("daemon.ready", {
    daemon_id: str,
    protocol: { const: "coding-relay-v1" },
    capabilities: { type: "array", items: str },
  }, ["daemon_id", "protocol"]),
  "run.start": frame("run.start", {
    job_id: nonEmpty,
    payload: {
      type: "object",
      properties: {
        run_id: str,
        prompt_text: str,
        input: { type: "object" },
        input_text: str,
        config: { type: "object" },
      },
      required: ["run_id"],
    },
  }, ["job_id", "payload"]),
  "mcp.response": frame("mcp.response", {
    request_id: str,
    job_id: nonEmpty,
    payload: json,
  }, ["request_id", "job_id", "payload"]),
  "run.cancel": frame("run.cancel", { job_id: nonEmpty }, ["job_id"]),
  "run.permission": frame("run.permission", {
    job_id: nonEmpty,
    request_id: nonEmpty,
    answer: { type: "object" },
  }, ["job_id", "request_id", "answer"]),
  "daemon.pong": frame("daemon.pong", {}, []),
};

/** One schema for each direction: any frame that side may send. */
export function relayDirectionSchema(
  direction: "daemon->hub" | "hub->daemon",
): JsonSchema {
  const frames = direction === "daemon->hub"
    ? DAEMON_FRAME_SCHEMAS
    : HUB_FRAME_SCHEMAS;
  return {
    $schema: "https://json-schema.org/draft/2020-12/schema",
    $id: `https://runner.invalid/contracts/relay/${
      direction === "daemon->hub" ? "daemon-frames" : "hub-frames"
    }`,
    title: `coding-relay-v1 frames ${direction}`,
    type: "object",
    required: ["type"],
    properties: { type: { enum: Object.keys(frames) } },
    allOf: Object.entries(frames).map(([type, schema]) => ({
      if: { properties: { type: { const: type } }, required: ["type"] },
      then: schema,
    })),
  };
}
