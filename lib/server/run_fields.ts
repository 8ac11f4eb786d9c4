/**
 * The fields of the runs API: ids and inputs as requests send them, the
 * response format a request asks for, and a run and its answer as responses
 * show them.
 *
 * @module
 */

import type { Context } from "hono";
import { RunnerError } from "../errors.ts";
import type { Attachment, RunInput } from "../run/prompt.ts";
import type { StreamFormat } from "./stream.ts";
import type { RunRecord } from "../store/types.ts";

const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$/;

/** Checks an optional id field (run or conversation id). */
export function optionalId(value: unknown, field: string): string | undefined {
  if (value === undefined || value === null || value === "") return undefined;
  if (typeof value === "number") value = String(value);
  if (typeof value !== "string" || !ID_PATTERN.test(value)) {
    throw new RunnerError(
      "http.bad_request",
      `${field} must be 1-128 letters, digits or . _ : @ - (starting with a letter or digit).`,
    );
  }
  return value;
}

/** Parses a run input (`{text, attachments}` or a plain string). */
export function parseRunInput(value: unknown): RunInput {
  if (typeof value === "string") return { text: value };
  if (!value || typeof value !== "object" || Array.isArray(value)) {
    throw new RunnerError(
      "http.bad_request",
      'input must be an object: {"text": "...", "attachments": [...]}.',
    );
  }
  const { text, attachments } = value as Record<string, unknown>;
  if (text !== undefined && typeof text !== "string") {
    throw new RunnerError("http.bad_request", "input.text must be a string.");
  }
  if (attachments !== undefined && !Array.isArray(attachments)) {
    throw new RunnerError(
      "http.bad_request",
      "input.attachments must be an array.",
    );
  }
  if (!text && !(attachments as unknown[] | undefined)?.length) {
    throw new RunnerError(
      "config.invalid",
      "input needs text or at least one attachment.",
    );
  }
  return { text, attachments: attachments as Attachment[] | undefined };
}

function booleanParam(value: unknown): boolean | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === "boolean") return value;
  const text = String(value).toLowerCase();
  if (["false", "0", "no", "off"].includes(text)) return false;
  if (["true", "1", "yes", "on", ""].includes(text)) return true;
  throw new RunnerError("http.bad_request", "stream must be true or false.");
}

/** The response format a request asks for. */
export function requestedFormat(
  c: Context,
  bodyStream?: unknown,
): StreamFormat | "json" {
  const stream = booleanParam(c.req.query("stream")) ??
    booleanParam(bodyStream);
  if (stream === false) return "json";
  const accept = c.req.header("accept") ?? "";
  return accept.includes("application/x-ndjson") ? "ndjson" : "sse";
}

/** Characters of a run's first input text that its API view shows. */
const PROMPT_START_CHARS = 200;

/** The start of a stored first prompt (the store keeps all of it), or null. */
function promptStart(prompt: string | undefined): string | null {
  if (prompt === undefined) return null;
  const chars = [...prompt];
  return chars.length > PROMPT_START_CHARS
    ? chars.slice(0, PROMPT_START_CHARS).join("")
    : prompt;
}

/**
 * A run as the API shows it. `active` is whether it is still in progress,
 * read from the same record as `status` so the two always agree (a run that
 * has ended shows its outcome even while the store cannot write it yet).
 */
export function runView(record: RunRecord): Record<string, unknown> {
  return {
    run_id: record.runId,
    conversation_id: record.conversationId ?? null,
    status: record.status,
    active: record.status === "active",
    code: record.code ?? null,
    error: record.error ?? null,
    config: record.config,
    prompt: promptStart(record.prompt),
    created_at: new Date(record.createdAt).toISOString(),
    updated_at: new Date(record.updatedAt).toISOString(),
    finished_at: record.finishedAt
      ? new Date(record.finishedAt).toISOString()
      : null,
    usage: record.usage ?? null,
  };
}
