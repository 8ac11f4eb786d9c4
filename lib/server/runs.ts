/**
 * The runs API: start (streamed as SSE, NDJSON or one JSON document),
 * follow-up input, cancel, read a run, resume its events, list runs.
 *
 * @module
 */

import { parseRunAssetsRequest } from "../assets/request.ts";
import type { Context, Hono } from "hono";
import { RunnerError } from "../errors.ts";
import type { RunRequest } from "../run/request.ts";
import type { ManagedRun } from "../run/manager.ts";
import { isTerminalEvent, type RunEvent } from "../events.ts";
import { resolveCallerConfig, serveSessionChoices } from "./policy.ts";
import type { ServeConfig } from "./config/serve_config.ts";
import { routeRunRequest } from "./fleet_router.ts";
import {
  failIfOrphaned,
  failOrphanedRuns,
  readJsonObject,
  type ServerContext,
} from "./context.ts";
import {
  answerRepeat,
  createSteeredPosts,
  requestedRunId,
  type RunToAnswer,
} from "./idempotency.ts";
import {
  optionalId,
  parseRunInput,
  requestedFormat,
  runView,
} from "./run_fields.ts";
import {
  type EventShape,
  finalMessage,
  requestedShape,
  shapeEvents,
  shapeStream,
} from "./stream_shape.ts";
import {
  eventStreamResponse,
  followRunEvents,
  parseAfterSequence,
  type StreamFormat,
} from "./stream.ts";
import type { ListRunsOptions, RunRecord, RunStatus } from "../store/types.ts";

const STATUSES: readonly RunStatus[] = [
  "active",
  "completed",
  "failed",
  "cancelled",
];

/**
 * The stored run; one the store shows active while no process owns it any
 * more (crashed, a zombie, a reused pid) is ended with `runner.restarted`
 * first (in a fleet: one whose replica's lease lapsed, with
 * `runner.replica_lost`).
 */
async function currentRecord(
  ctx: ServerContext,
  runId: string,
): Promise<RunRecord | undefined> {
  const record = await ctx.store.getRun(runId);
  if (record?.status !== "active" || ctx.manager.get(runId)) return record;
  return (await failOrphanedRuns(ctx.store, { runId, log: ctx.log })).length
    ? await ctx.store.getRun(runId)
    : record;
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
    sessionChoices: serveSessionChoices(config),
  };
}

/** Answers a started (or re-attached) run as a stream or, once ended, as JSON. */
async function respondWithRun(
  c: Context,
  ctx: ServerContext,
  answer: RunToAnswer,
  { format, shape }: {
    format: StreamFormat | "json";
    shape: EventShape;
  },
): Promise<Response> {
  const { store } = ctx;
  const { runId, run, after } = answer;
  if (format !== "json") {
    const follower = followRunEvents({
      store,
      runId,
      run,
      after,
      maxPendingEvents: ctx.maxPendingEvents,
    });
    return eventStreamResponse(
      shapeStream(follower, { store, runId, after, shape }),
      format,
      {
        headers: { "x-run-id": runId },
        keepaliveMs: ctx.config.keepaliveSeconds * 1000,
      },
    );
  }
  const ending = run && lastDeliveredEvent(run);
  await run?.done;
  const stored = await store.getEvents(runId);
  const record = await store.getRun(runId);
  const lost = lostEnding(record, ending?.());
  const events = shapeEvents(lost ? [...stored, lost] : stored, shape);
  return c.json(
    ctx.redact({
      run_id: runId,
      conversation_id: answer.conversationId ?? null,
      status: lost ? "failed" : record?.status ?? "failed",
      code: lost?.data.code ?? record?.code ?? null,
      error: lost?.data.error ?? record?.error ?? null,
      message: finalMessage(events),
      // The run's usage as its terminal event carries it (none reported: absent).
      ...usageField(events),
      events,
    }),
    200,
    { "x-run-id": runId },
  );
}

/** `{usage}` of the run's terminal event, or nothing. */
function usageField(events: RunEvent[]): { usage?: RunEvent["usage"] } {
  const usage = events.find(isTerminalEvent)?.usage;
  return usage ? { usage } : {};
}

/** Follows a live run; returns what it delivered last to its listeners. */
function lastDeliveredEvent(run: ManagedRun): () => RunEvent | undefined {
  let last: RunEvent | undefined;
  const unsubscribe = run.subscribe((event) => last = event);
  run.done.finally(unsubscribe).catch(() => {});
  return () => last;
}

/**
 * The terminal event a run's listeners got when the store never took the
 * run's end: this replica lost its fleet lease mid-run, so the run ended
 * for its clients as `runner.replica_lost` while its stored record still
 * says active (the fleet's sweep fails it there later).
 */
function lostEnding(
  record: RunRecord | undefined,
  delivered: RunEvent | undefined,
): RunEvent | undefined {
  if (record?.status !== "active" || delivered?.type !== "run.failed") {
    return undefined;
  }
  return delivered.data.code === "runner.replica_lost" ? delivered : undefined;
}

/** `POST /v1/runs`: starts a run, or steers the conversation's active one. */
function registerStartRoute(app: Hono, ctx: ServerContext): void {
  const steeredPosts = createSteeredPosts();

  app.post("/v1/runs", async (c) => {
    const body = await readJsonObject(c);
    const format = requestedFormat(c, body.stream);
    const shape = requestedShape(c, body);
    const runId = requestedRunId(c, optionalId(body.run_id, "run_id"));
    // In a fleet, a repeat of a run active on another replica re-attaches there.
    const owner = runId ? await routeRunRequest(c, ctx, runId) : undefined;
    if (owner) return owner;
    const repeat = runId
      ? await answerRepeat(c, {
        ctx,
        steeredPosts,
        runId,
        conversationId: optionalId(body.conversation_id, "conversation_id"),
        after: c.req.header("last-event-id") ? parseAfterSequence(c) : 0,
      })
      : undefined;
    if (repeat instanceof Response) return repeat;
    if (repeat) {
      return await respondWithRun(c, ctx, repeat, { format, shape });
    }
    const request = { ...parseStartBody(body, ctx.config), runId };
    const forwarded = await routeStart(c, ctx, request);
    if (forwarded) return forwarded;
    const outcome = await ctx.startRun(request);
    if (outcome.kind === "steered") {
      if (runId) steeredPosts.remember(runId, outcome.run.runId);
      return c.json({ run_id: outcome.run.runId, steered: true }, 202);
    }
    const { run } = outcome;
    return await respondWithRun(c, ctx, {
      runId: run.runId,
      conversationId: run.conversationId,
      run,
    }, { format, shape });
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
    daemonId: optionalId(c.req.query("daemon_id"), "daemon_id"),
    before: optionalId(c.req.query("before"), "before"),
    limit,
  };
}

/** `GET /v1/runs`, `GET /v1/runs/:id` and `GET /v1/runs/:id/events`. */
function registerReadRoutes(app: Hono, ctx: ServerContext): void {
  const { store, manager } = ctx;

  app.get("/v1/runs", async (c) => {
    const query = parseListQuery(c);
    if (query.before !== undefined && !(await store.getRun(query.before))) {
      throw new RunnerError(
        "http.bad_request",
        `before names no stored run (${query.before}); page on with the run_id of the last run of the previous page.`,
      );
    }
    const runs = await store.listRuns(query);
    return c.json(
      ctx.redact({
        runs: runs.map((record) => runView(record)),
      }),
    );
  });

  app.get("/v1/runs/:id", async (c) => {
    const runId = c.req.param("id");
    const forwarded = await routeRunRequest(c, ctx, runId);
    if (forwarded) return forwarded;
    const record = await currentRecord(ctx, runId);
    if (!record) throw notFound(runId);
    const events = await store.getEvents(runId);
    return c.json(ctx.redact({
      ...runView(record),
      events: shapeEvents(events, requestedShape(c)),
    }));
  });

  app.get("/v1/runs/:id/events", async (c) => {
    const runId = c.req.param("id");
    const forwarded = await routeRunRequest(c, ctx, runId);
    if (forwarded) return forwarded;
    const record = await currentRecord(ctx, runId);
    if (!record) throw notFound(runId);
    const after = parseAfterSequence(c);
    const format = requestedFormat(c);
    const shape = requestedShape(c);
    if (format === "json") {
      const events = shape.allContent || shape.leanCompletions
        ? shapeEvents(await store.getEvents(runId), shape).filter((event) =>
          (event.sequence ?? 0) > after
        )
        : await store.getEvents(runId, { after });
      return c.json(
        ctx.redact({ run_id: runId, status: record.status, events }),
      );
    }
    const run = manager.get(runId);
    if (
      !run && record.status !== "active" &&
      !(await store.getEvents(runId, { after, limit: 1 })).length
    ) {
      // Everything up to the terminal event was delivered: 204 tells an
      // EventSource to stop reconnecting.
      return c.body(null, 204);
    }
    const follower = followRunEvents({
      store,
      runId,
      run,
      after,
      maxPendingEvents: ctx.maxPendingEvents,
      failIfOrphaned: (id) => failIfOrphaned(store, id, ctx.log),
    });
    return eventStreamResponse(
      shapeStream(follower, { store, runId, after, shape }),
      format,
      { keepaliveMs: ctx.config.keepaliveSeconds * 1000 },
    );
  });
}

/** `POST /v1/runs/:id/input` and `POST /v1/runs/:id/cancel`. */
function registerControlRoutes(app: Hono, ctx: ServerContext): void {
  const { manager } = ctx;

  app.post("/v1/runs/:id/input", async (c) => {
    const runId = c.req.param("id");
    const forwarded = await routeRunRequest(c, ctx, runId);
    if (forwarded) return forwarded;
    const body = await readJsonObject(c);
    const input = parseRunInput(
      body.input ??
        (body.text !== undefined || body.attachments ? body : undefined),
    );
    const run = manager.get(runId);
    if (!run) {
      const record = await currentRecord(ctx, runId);
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
    const forwarded = await routeRunRequest(c, ctx, runId);
    if (forwarded) return forwarded;
    const run = manager.get(runId);
    if (run) {
      run.handle.cancel();
      await run.done;
    }
    const record = await currentRecord(ctx, runId);
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
