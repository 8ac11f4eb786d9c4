/**
 * `GET /v1/agents` and `DELETE /v1/agents/{id}`: the warm agents the runner
 * keeps between a conversation's runs (`docs/runs.md`, "Warm agents").
 *
 * @module
 */

import type { Hono } from "hono";
import { RunnerError } from "../errors.ts";
import type { ServerContext } from "./context.ts";

/** Adds the warm-agent routes. */
export function registerAgentRoutes(app: Hono, ctx: ServerContext): void {
  app.get(
    "/v1/agents",
    (c) => c.json(ctx.redact({ agents: ctx.warmAgents?.list() ?? [] })),
  );

  app.delete("/v1/agents/:id", async (c) => {
    const agentId = c.req.param("id");
    if (!(await ctx.warmAgents?.stop(agentId))) {
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
