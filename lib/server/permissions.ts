/**
 * `POST /v1/runs/:id/permissions/:request_id`: a person's answer to an open
 * permission request of a run with `permission-decision=ask`. See
 * `docs/http-api.md`, "Permission answers".
 *
 * @module
 */

import type { Hono } from "hono";
import { RunnerError } from "../errors.ts";
import type { PermissionAnswer } from "../run/permission_desk.ts";
import { readJsonObject, type ServerContext } from "./context.ts";
import { routeRunRequest } from "./fleet_router.ts";

/** Registers the permission-answer route. */
export function registerPermissionRoutes(
  app: Hono,
  ctx: ServerContext,
): void {
  app.post("/v1/runs/:id/permissions/:request_id", async (c) => {
    const runId = c.req.param("id");
    const requestId = c.req.param("request_id");
    // In a fleet the answer goes to the replica running the run.
    const forwarded = await routeRunRequest(c, ctx, runId);
    if (forwarded) return forwarded;
    const answer = parseAnswer(await readJsonObject(c));
    const run = ctx.manager.get(runId);
    if (!run) {
      const record = await ctx.store.getRun(runId);
      if (!record) {
        throw new RunnerError("http.not_found", `No run ${runId}.`);
      }
      throw new RunnerError(
        "http.conflict",
        `Run ${runId} has ended (status ${record.status}); its permission requests were already decided.`,
      );
    }
    const outcome = run.handle.answerPermission(requestId, answer);
    if (outcome === "unknown") {
      throw new RunnerError(
        "http.not_found",
        `Run ${runId} has no permission request ${requestId}; read the request_id from its permission.requested event.`,
      );
    }
    if (outcome === "already_answered") {
      throw new RunnerError(
        "http.conflict",
        `Permission request ${requestId} was already decided; see its permission.decided event.`,
      );
    }
    return c.json({ run_id: runId, request_id: requestId, answered: true });
  });
}

function parseAnswer(body: Record<string, unknown>): PermissionAnswer {
  if (typeof body.option_id === "string" && body.option_id) {
    return { option_id: body.option_id };
  }
  if (typeof body.decision === "string") {
    return {
      decision: body.decision as Extract<
        PermissionAnswer,
        { decision: unknown }
      >["decision"],
    };
  }
  throw new RunnerError(
    "http.bad_request",
    'Send {"option_id": "…"} with an option the agent offered, or {"decision": "allow_once" | "allow_always" | "reject_once" | "reject_always"}.',
  );
}
