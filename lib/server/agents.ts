/**
 * `GET /v1/agents` and `DELETE /v1/agents/{id}`: the warm agents the runner
 * keeps between a conversation's runs (`docs/runs.md`, "Warm agents"). In a
 * fleet both cover every live replica: the list gathers each one's agents,
 * a delete is passed to the replica that keeps the agent.
 *
 * @module
 */

import type { Context, Hono } from "hono";
import { RunnerError } from "../errors.ts";
import type { ServerContext } from "./context.ts";

/** This replica's warm agents, each with its `replica_id` in a fleet. */
function localAgents(ctx: ServerContext): Record<string, unknown>[] {
  const replicaId = ctx.fleet?.fleet.replicaId;
  return (ctx.warmAgents?.list() ?? []).map((agent) =>
    replicaId ? { ...agent, replica_id: replicaId } : { ...agent }
  );
}

/** The warm agents of the other live replicas (none outside a fleet). */
async function otherAgents(
  c: Context,
  ctx: ServerContext,
): Promise<Record<string, unknown>[]> {
  if (!ctx.fleet) return [];
  const agents: Record<string, unknown>[] = [];
  for (const { replicaId, response } of await ctx.fleet.toOtherReplicas(c)) {
    if (!response.ok) {
      await response.body?.cancel();
      continue;
    }
    const body = await response.json() as { agents?: unknown[] };
    for (const agent of body.agents ?? []) {
      agents.push({
        ...(agent as Record<string, unknown>),
        replica_id: replicaId,
      });
    }
  }
  return agents;
}

/** Passes a delete to the other live replicas; the one that kept the agent answers. */
async function stopElsewhere(
  c: Context,
  ctx: ServerContext,
): Promise<Response | undefined> {
  if (!ctx.fleet) return undefined;
  let stopped: Response | undefined;
  for (const { response } of await ctx.fleet.toOtherReplicas(c)) {
    if (response.ok && !stopped) stopped = response;
    else await response.body?.cancel();
  }
  return stopped;
}

/** Adds the warm-agent routes. */
export function registerAgentRoutes(app: Hono, ctx: ServerContext): void {
  app.get("/v1/agents", async (c) => {
    const agents = [...localAgents(ctx), ...(await otherAgents(c, ctx))];
    return c.json(ctx.redact({ agents }));
  });

  app.delete("/v1/agents/:id", async (c) => {
    const agentId = c.req.param("id");
    if (!(await ctx.warmAgents?.stop(agentId))) {
      const elsewhere = await stopElsewhere(c, ctx);
      if (elsewhere) return elsewhere;
      throw new RunnerError(
        "http.not_found",
        `No warm agent ${agentId} is idle. See GET /v1/agents; an agent in use is stopped by cancelling its run.`,
      );
    }
    ctx.log({ msg: "warm agent stopped by operator", agent_id: agentId });
    return c.json({ agent_id: agentId, stopped: true });
  });
}
/** The `/metrics` lines of the warm pool. */
export function warmAgentMetricLines(ctx: ServerContext): string[] {
  const stats = ctx.warmAgents?.stats();
  if (!stats) return [];
  return [
    "# HELP runner_warm_agents Warm agents idle in the pool.",
    "# TYPE runner_warm_agents gauge",
    `runner_warm_agents ${stats.size}`,
    "# HELP runner_warm_agent_hits_total Runs that took a warm agent (no spawn, initialize or session call).",
    "# TYPE runner_warm_agent_hits_total counter",
    `runner_warm_agent_hits_total ${stats.hits}`,
    "# HELP runner_warm_agent_misses_total Runs that continue a stored session but found no warm agent for their target, and started one.",
    "# TYPE runner_warm_agent_misses_total counter",
    `runner_warm_agent_misses_total ${stats.misses}`,
    "# HELP runner_warm_agent_evictions_total Warm agents stopped, by reason.",
    "# TYPE runner_warm_agent_evictions_total counter",
    ...Object.entries(stats.evictions).map(([reason, count]) =>
      `runner_warm_agent_evictions_total{reason="${reason}"} ${count}`
    ),
  ];
}
