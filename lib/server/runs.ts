/**
 * The runs API: start (streamed as SSE, NDJSON or one JSON document),
 * follow-up input, cancel, read a run, resume its events, list runs.
 *
 * @module
 */

import { parseRunAssetsRequest } from "../assets/request.ts";
import type { Context, Hono } from "hono";
import { RunnerError } from "../errors.ts";
import type { RunEvent } from "../events.ts";
import type { Attachment, RunInput } from "../run/prompt.ts";
import type { ManagedRun } from "../run/manager.ts";
import type { RunRequest } from "../run/request.ts";
import { resolveCallerConfig } from "./policy.ts";
import type { ServeConfig } from "./config.ts";
import { readJsonObject, type ServerContext } from "./context.ts";
import {
  eventStreamResponse,
  followRunEvents,
  type StreamFormat,
} from "./stream.ts";
import type { ListRunsOptions, RunRecord, RunStatus } from "../store/types.ts";

const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$/;
const STATUSES: readonly RunStatus[] = [
  "active",
  "completed",
  "failed",
  "cancelled",
];

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

/** A run as the API shows it. */
export function runView(
  record: RunRecord,
  active: boolean,
): Record<string, unknown> {
  return {
    run_id: record.runId,
    conversation_id: record.conversationId ?? null,
    status: record.status,
    active,
    code: record.code ?? null,
    error: record.error ?? null,
    config: record.config,
    created_at: new Date(record.createdAt).toISOString(),
    updated_at: new Date(record.updatedAt).toISOString(),
    finished_at: record.finishedAt
      ? new Date(record.finishedAt).toISOString()
      : null,
  };
}

/** The final assistant message of an event list. */
export function finalMessage(events: RunEvent[]): string {
  for (let index = events.length - 1; index >= 0; index--) {
    const event = events[index];
    if (event.type === "run.completed" || event.type === "message.completed") {
      const message = event.data.message as { content?: unknown } | undefined;
      if (typeof message?.content === "string") return message.content;
    }
  }
  return "";
}

function notFound(runId: string): RunnerError {
  return new RunnerError(
    "http.not_found",
    `No run ${runId}. GET /v1/runs lists recent runs.`,
  );
}

/** Adds the `/v1/runs` routes. */
export function registerRunRoutes(app: Hono, ctx: ServerContext): void {
  registerStartRoute(app, ctx);
  registerReadRoutes(app, ctx);
  registerControlRoutes(app, ctx);
}

/** The run request of a `POST /v1/runs` body. */
function parseStartBody(
  body: Record<string, unknown>,
  config: ServeConfig,
): RunRequest {
  const runId = optionalId(body.run_id, "run_id");
  const conversationId = optionalId(body.conversation_id, "conversation_id");
  if (
    body.config !== undefined &&
    (typeof body.config !== "object" || Array.isArray(body.config) ||
      !body.config)
  ) {
    throw new RunnerError(
      "http.bad_request",
      "config must be an object of run-config keys.",
    );
  }
  const input = parseRunInput(body.input);
  const runConfig = resolveCallerConfig(
    config,
    body.config as Record<string, unknown> | undefined,
  );
  return {
    runId,
    conversationId,
    input,
    config: runConfig,
    assets: parseRunAssetsRequest(body.assets),
  };
}

/** `POST /v1/runs`: starts a run, or steers the conversation's active one. */
function registerStartRoute(app: Hono, ctx: ServerContext): void {
  const { store } = ctx;

  async function respondWithRun(
    c: Context,
    run: ManagedRun,
    format: StreamFormat | "json",
  ) {
    if (format !== "json") {
      return eventStreamResponse(
        followRunEvents({ store, runId: run.runId, run }),
        format,
        {
          headers: { "x-run-id": run.runId },
        },
      );
    }
    await run.done;
    const events = await store.getEvents(run.runId);
    const record = await store.getRun(run.runId);
    return c.json(ctx.redact({
      run_id: run.runId,
      conversation_id: run.conversationId ?? null,
      status: record?.status ?? "failed",
      code: record?.code ?? null,
      error: record?.error ?? null,
      message: finalMessage(events),
      events,
    }));
  }

  app.post("/v1/runs", async (c) => {
    const body = await readJsonObject(c);
    const format = requestedFormat(c, body.stream);
    const request = parseStartBody(body, ctx.config);
    const forwarded = await routeStart(c, ctx, request);
    if (forwarded) return forwarded;
    const outcome = await ctx.startRun(request);
    if (outcome.kind === "steered") {
      return c.json({ run_id: outcome.run.runId, steered: true }, 202);
    }
    return await respondWithRun(c, outcome.run, format);
  });
}

/**
 * In a fleet: forwards a new run to the replica holding its daemon or owning
 * its conversation (claiming the conversation here otherwise); undefined:
 * start it here.
 */
async function routeStart(
  c: Context,
  ctx: ServerContext,
  request: RunRequest,
): Promise<Response | undefined> {
  if (!ctx.fleet) return undefined;
  const { config, conversationId } = request;
  if (config.location === "daemon" && config.daemonId) {
    const forwarded = await ctx.fleet.forDaemon(c, config.daemonId);
    if (forwarded) return forwarded;
    // The daemon's machine holds the agent session: the conversation follows it.
    return await ctx.fleet.forConversation(c, conversationId, { force: true });
  }
  return await ctx.fleet.forConversation(c, conversationId);
}

/** In a fleet: forwards a request about a run active on another replica. */
async function routeRun(
  c: Context,
  ctx: ServerContext,
  runId: string,
): Promise<Response | undefined> {
  if (!ctx.fleet || ctx.manager.get(runId)) return undefined;
  return await ctx.fleet.forRun(c, runId);
}

/** The filter of `GET /v1/runs`, from its query. */
function parseListQuery(c: Context): ListRunsOptions {
  const status = c.req.query("status");
  if (status !== undefined && !STATUSES.includes(status as RunStatus)) {
    throw new RunnerError(
      "http.bad_request",
      `status must be one of ${STATUSES.join(", ")}.`,
    );
  }
  const limit = Number(c.req.query("limit") ?? 50);
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) {
    throw new RunnerError(
      "http.bad_request",
      "limit must be an integer 1-1000.",
    );
  }
  return {
    conversationId: optionalId(
      c.req.query("conversation_id"),
      "conversation_id",
    ),
    status: status as RunStatus | undefined,
    limit,
  };
}

/** The sequence `GET /v1/runs/:id/events` resumes after. */
function parseAfterSequence(c: Context): number {
  const afterText = c.req.query("after") ?? c.req.header("last-event-id") ??
    "0";
  const after = Number(afterText);
  if (!Number.isInteger(after) || after < 0) {
    throw new RunnerError(
      "http.bad_request",
      "after (or Last-Event-ID) must be a non-negative integer sequence.",
    );
  }
  return after;
}

/** `GET /v1/runs`, `GET /v1/runs/:id` and `GET /v1/runs/:id/events`. */
function registerReadRoutes(app: Hono, ctx: ServerContext): void {
  const { store, manager } = ctx;

  app.get("/v1/runs", async (c) => {
    const runs = await store.listRuns(parseListQuery(c));
    return c.json(
      ctx.redact({
        runs: runs.map((record) =>
          runView(record, Boolean(manager.get(record.runId)))
        ),
      }),
    );
  });

  app.get("/v1/runs/:id", async (c) => {
    const runId = c.req.param("id");
    const forwarded = await routeRun(c, ctx, runId);
    if (forwarded) return forwarded;
    const record = await store.getRun(runId);
    if (!record) throw notFound(runId);
    return c.json(ctx.redact({
      ...runView(record, Boolean(manager.get(runId))),
      events: await store.getEvents(runId),
    }));
  });

  app.get("/v1/runs/:id/events", async (c) => {
    const runId = c.req.param("id");
    const forwarded = await routeRun(c, ctx, runId);
    if (forwarded) return forwarded;
    const record = await store.getRun(runId);
    if (!record) throw notFound(runId);
    const after = parseAfterSequence(c);
    const format = requestedFormat(c);
    if (format === "json") {
      return c.json(
        ctx.redact({
          run_id: runId,
          status: record.status,
          events: await store.getEvents(runId, { after }),
        }),
      );
    }
    return eventStreamResponse(
      followRunEvents({ store, runId, run: manager.get(runId), after }),
      format,
    );
  });
}

/** `POST /v1/runs/:id/input` and `POST /v1/runs/:id/cancel`. */
function registerControlRoutes(app: Hono, ctx: ServerContext): void {
  const { store, manager } = ctx;

  app.post("/v1/runs/:id/input", async (c) => {
    const runId = c.req.param("id");
    const forwarded = await routeRun(c, ctx, runId);
    if (forwarded) return forwarded;
    const body = await readJsonObject(c);
    const input = parseRunInput(
      body.input ??
        (body.text !== undefined || body.attachments ? body : undefined),
    );
    const run = manager.get(runId);
    if (!run) {
      const record = await store.getRun(runId);
      if (!record) throw notFound(runId);
      throw new RunnerError(
        "http.conflict",
        `Run ${runId} is not active (status ${record.status}); start a new run with POST /v1/runs${
          record.conversationId
            ? ` and conversation_id ${record.conversationId}`
            : ""
        }.`,
      );
    }
    if (!run.conversationId) {
      throw new RunnerError(
        "http.conflict",
        `Run ${runId} has no conversation, so it cannot take follow-ups; start runs with a conversation_id to steer them.`,
      );
    }
    const outcome = run.handle.steer(input);
    if (outcome === "full") {
      throw new RunnerError(
        "run.steering_queue_full",
        "This run already holds 100 queued follow-ups. Wait for it to finish.",
      );
    }
    if (outcome === "closed") {
      throw new RunnerError(
        "http.conflict",
        `Run ${runId} is finishing and takes no more input; start a new run with POST /v1/runs and conversation_id ${run.conversationId}.`,
      );
    }
    return c.json({ run_id: runId, queued: true }, 202);
  });

  app.post("/v1/runs/:id/cancel", async (c) => {
    const runId = c.req.param("id");
    const forwarded = await routeRun(c, ctx, runId);
    if (forwarded) return forwarded;
    const run = manager.get(runId);
    if (run) {
      run.handle.cancel();
      await run.done;
    }
    const record = await store.getRun(runId);
    if (!record) throw notFound(runId);
    return c.json(
      ctx.redact({
        run_id: runId,
        status: record.status,
        code: record.code ?? null,
      }),
    );
  });
}
