/**
 * The peer contracts as checks every test can call: LangBot's
 * `RunnerResult` (`lib/contracts/langbot_result.ts`), the `coding-relay-v1`
 * frames of each direction (`lib/contracts/relay_frames.ts`), the objects
 * LangBot's n8n runner reads (`lib/contracts/n8n_stream.ts`) and the runner's
 * own HTTP run events (`RunEvent` of `/openapi.json`). A violation fails with
 * the path and value of the first offending field.
 *
 * @module
 */

import { AssertionError } from "node:assert/strict";
import {
  Ajv2020,
  type ErrorObject,
  type ValidateFunction,
} from "ajv/dist/2020.js";
import {
  LANGBOT_RUN_RESULT_SCHEMA,
  LANGBOT_WIRE_EVENT_SCHEMA,
} from "../lib/contracts/langbot_result.ts";
import { relayDirectionSchema } from "../lib/contracts/relay_frames.ts";
import {
  N8N_STREAM_OBJECT_SCHEMA,
  n8nAnswerSchema,
} from "../lib/contracts/n8n_stream.ts";
import { openApiDocument } from "../lib/server/openapi/document.ts";

/** A direction of the relay wire. */
export type RelayDirection = "daemon->hub" | "hub->daemon";

/** One Ajv per contract family, compiled on first use (the OpenAPI document is large). */
const cache = new Map<string, ValidateFunction>();

function compiled(
  name: string,
  build: () => ValidateFunction,
): ValidateFunction {
  let validate = cache.get(name);
  if (!validate) cache.set(name, validate = build());
  return validate;
}

function relayAjv(): Ajv2020 {
  const ajv = new Ajv2020({ strict: false, allErrors: false });
  ajv.addSchema(LANGBOT_WIRE_EVENT_SCHEMA);
  return ajv;
}

function validators() {
  return {
    get langbot() {
      return compiled(
        "langbot",
        () => new Ajv2020({ strict: false }).compile(LANGBOT_RUN_RESULT_SCHEMA),
      );
    },
    relay(direction: RelayDirection) {
      return compiled(
        direction,
        () => relayAjv().compile(relayDirectionSchema(direction)),
      );
    },
    get n8n() {
      return compiled(
        "n8n",
        () => new Ajv2020({ strict: false }).compile(N8N_STREAM_OBJECT_SCHEMA),
      );
    },
    get n8nAnswer() {
      return compiled(
        "n8nAnswer",
        () => new Ajv2020({ strict: false }).compile(n8nAnswerSchema()),
      );
    },
    get http() {
      return compiled("http", () => {
        const ajv = new Ajv2020({ strict: false });
        ajv.addSchema(openApiDocument(), "openapi");
        return ajv.getSchema("openapi#/components/schemas/RunEvent")!;
      });
    },
  };
}

function valueAt(root: unknown, pointer: string): unknown {
  let value = root;
  for (const raw of pointer.split("/").slice(1)) {
    const key = raw.replaceAll("~1", "/").replaceAll("~0", "~");
    value = value && typeof value === "object"
      ? (value as Record<string, unknown>)[key]
      : undefined;
  }
  return value;
}

function describe(error: ErrorObject, root: unknown): string {
  const path = error.instancePath || "/";
  const extra = error.keyword === "additionalProperties"
    ? ` (${
      (error.params as { additionalProperty: string }).additionalProperty
    })`
    : "";
  const value = JSON.stringify(valueAt(root, error.instancePath));
  return `${path}: ${error.message}${extra}; value ${
    value === undefined ? "undefined" : value.slice(0, 300)
  }`;
}

function check(
  validate: ValidateFunction,
  what: string,
  value: unknown,
): void {
  if (validate(value)) return;
  // The deepest error names the field; if/then wrappers come last.
  const errors = (validate.errors ?? []).filter((e) => e.keyword !== "if");
  const first =
    errors.sort((a, b) => b.instancePath.length - a.instancePath.length)[0] ??
      validate.errors![0];
  throw new AssertionError({
    message: `${what} breaks its contract at ${describe(first, value)}\n${
      JSON.stringify(value).slice(0, 2000)
    }`,
  });
}

/** Fails unless `event` validates as LangBot's `RunnerResult`. */
export function assertLangBotEvent(event: unknown): void {
  check(validators().langbot, "LangBot RunnerResult", event);
}

/**
 * Fails unless `frame` (its text or parsed JSON) is a valid
 * `coding-relay-v1` frame of `direction`; a `run.event`'s event must
 * validate as LangBot's `RunnerResult`. Returns the parsed frame.
 */
export function assertRelayFrame(
  frame: string | Record<string, unknown>,
  direction: RelayDirection,
): Record<string, unknown> {
  const parsed = typeof frame === "string" ? JSON.parse(frame) : frame;
  check(validators().relay(direction), `relay frame ${direction}`, parsed);
  return parsed;
}

/** Fails unless `value` is one object of the n8n webhook's stream. */
export function assertN8nObject(value: unknown): void {
  check(validators().n8n, "n8n stream object", value);
}

/** Fails unless `value` is the n8n webhook's answer without streaming. */
export function assertN8nAnswer(value: unknown): void {
  check(validators().n8nAnswer, "n8n answer", value);
}

/** Fails unless `event` is a run event as the HTTP API documents it. */
export function assertHttpEvent(event: unknown): void {
  check(validators().http, "HTTP run event", event);
}

// Compiled at load, not inside a socket's message handler, where a first
// compile would stall the event loop that a peer's keep-alive is watching.
validators().relay("daemon->hub");
validators().relay("hub->daemon");
