/**
 * Meta routes: `/healthz`, `/metrics`, `/openapi.json`, `/v1/providers` and
 * the stored sessions of a conversation.
 *
 * @module
 */

import { settleWithin } from "../timing.ts";
import type { Hono } from "hono";
import { RunnerError } from "../errors.ts";
import { warmAgentMetricLines } from "./agents.ts";
import type { DaemonGauges } from "./metrics.ts";
import { openApiDocument } from "./openapi/document.ts";
import { listProviders } from "../providers.ts";
import type { ServerContext } from "./context.ts";
import { optionalId } from "./run_fields.ts";
import { RUNNER_VERSION } from "../version.ts";
import { conversationRuns, totalUsage } from "../store/usage_totals.ts";

async function daemonGauges(
  ctx: ServerContext,
): Promise<DaemonGauges | undefined> {
  if (!ctx.daemons) return undefined;
  const daemons = (await ctx.daemons.list()).daemons;
  return {
    connected: daemons.filter((d) => d.connected).length,
    fenced: daemons.filter((d) => d.fenced).length,
    activeJobs: daemons.reduce(
      (sum, d) =>
        sum +
        (Array.isArray(d.active_jobs)
          ? d.active_jobs.length
          : Number(d.active_jobs ?? 0)),
      0,
    ),
  };
}

/** Adds the meta routes. */
export function registerMetaRoutes(app: Hono, ctx: ServerContext): void {
  registerServiceRoutes(app, ctx);
  registerDaemonRoutes(app, ctx);
  registerConversationRoutes(app, ctx);
}

/** `/healthz`, `/metrics`, `/openapi.json` and `/v1/providers`. */
function registerServiceRoutes(app: Hono, ctx: ServerContext): void {
  const { manager } = ctx;

  app.get("/healthz", async (c) => {
    const shuttingDown = ctx.isShuttingDown();
    // In a fleet the store's health includes the replica's lease renewals.
    const store = await ctx.store.health();
    const status = shuttingDown
      ? "shutting_down"
      : store.ok
      ? "ok"
      : "degraded";
    return c.json(
      ctx.redact({
        status,
        version: RUNNER_VERSION,
        active_runs: manager.active().length,
        store: store.ok ? { ok: true } : { ok: false, error: store.error },
        ...(ctx.fleet ? { replica_id: ctx.fleet.fleet.replicaId } : {}),
      }),
      status === "ok" ? 200 : 503,
    );
  });

  app.get(
    "/metrics",
    async (c) =>
      c.body(
        await ctx.metrics.render(
          manager.active().length,
          await daemonGauges(ctx),
          await ctx.store.size().catch(() => undefined),
        ) + warmAgentMetricLines(ctx).map((line) => `${line}\n`).join(""),
        200,
        {
          "content-type": "text/plain; version=0.0.4; charset=utf-8",
        },
      ),
  );

  app.get("/openapi.json", (c) => c.json(openApiDocument()));

  app.get("/v1/providers", (c) => c.json(listProviders()));
}

/** `/v1/daemons` and `/v1/daemons/:id/unfence`. */
function registerDaemonRoutes(app: Hono, ctx: ServerContext): void {
  app.get(
    "/v1/daemons",
    async (c) => c.json(await ctx.daemons?.list() ?? { daemons: [] }),
  );

  app.post("/v1/daemons/:id/unfence", async (c) => {
    const daemonId = c.req.param("id");
    if (!ctx.daemons) {
      throw new RunnerError(
        "http.not_found",
        "The daemon hub is not enabled; start runner serve with --daemon-enabled.",
      );
    }
    ctx.log({ msg: "daemon unfenced by operator", daemon_id: daemonId });
    return c.json({
      daemon_id: daemonId,
      was_fenced: await ctx.daemons.unfence(daemonId),
    });
  });
}

/** The id of the conversation's active run, here or (in a fleet) on any replica. */
async function activeRunOf(
  ctx: ServerContext,
  conversationId: string,
): Promise<string | undefined> {
  const here = ctx.manager.activeForConversation(conversationId)?.runId;
  if (here || !ctx.fleet) return here;
  const [run] = await ctx.store.listRuns({
    conversationId,
    status: "active",
    limit: 1,
  });
  return run?.runId;
}

/** How long a DELETE waits for a run that ended for its clients to let go. */
const ENDED_RUN_WAIT_MS = 10_000;

/**
 * Waits (bounded) for the conversation's run here when its outcome is
 * already stored: its clients saw the terminal event, but the run still
 * releases its agent (a daemon run waits for the daemon's acknowledgement),
 * and a client that deletes the conversation next must not get a conflict.
 */
async function settleEndedRun(
  ctx: ServerContext,
  conversationId: string,
): Promise<void> {
  const run = ctx.manager.activeForConversation(conversationId);
  if (!run) return;
  const record = await ctx.store.getRun(run.runId);
  if (record && record.status !== "active") {
    await settleWithin(run.done, ENDED_RUN_WAIT_MS);
  }
}

/** `GET` and `DELETE /v1/conversations/:id`: a conversation's stored sessions. */
function registerConversationRoutes(app: Hono, ctx: ServerContext): void {
  const { store } = ctx;

  app.get("/v1/conversations/:id", async (c) => {
    const conversationId = optionalId(c.req.param("id"), "conversation id")!;
    const sessions = await store.listSessions(conversationId);
    const active = await activeRunOf(ctx, conversationId);
    const runs = await conversationRuns(store, conversationId);
    if (!sessions.length && !active && !runs.length) {
      throw new RunnerError(
        "http.not_found",
        `No conversation ${conversationId} is known (no runs, no stored sessions).`,
      );
    }
    return c.json(ctx.redact({
      conversation_id: conversationId,
      active_run_id: active ?? null,
      sessions: sessions.map((session) => ({
        session_id: session.sessionId,
        provider: session.provider,
        location: session.location,
        target: session.target,
        workspace: session.workspace,
        agent_command: session.agentCommand,
        updated_at: new Date(session.updatedAt).toISOString(),
        settings: session.settings ?? null,
      })),
      runs: runs.length,
      usage: totalUsage(runs) ?? null,
    }));
  });

  app.delete("/v1/conversations/:id", async (c) => {
    const conversationId = optionalId(c.req.param("id"), "conversation id")!;
    // In a fleet the owner answers: its warm agents hold the sessions.
    const forwarded = await ctx.fleet?.toConversationOwner(c, conversationId);
    if (forwarded) return forwarded;
    await settleEndedRun(ctx, conversationId);
    const active = await activeRunOf(ctx, conversationId);
    if (active) {
      throw new RunnerError(
        "http.conflict",
        `Conversation ${conversationId} has an active run (${active}); cancel it first (POST /v1/runs/${active}/cancel).`,
      );
    }
    const deletedSessions = await store.deleteSessions(conversationId);
    // The conversation's warm agents hold the forgotten sessions: stop them.
    await ctx.warmAgents?.forgetConversation(conversationId);
    return c.json({
      conversation_id: conversationId,
      deleted_sessions: deletedSessions,
    });
  });
}
