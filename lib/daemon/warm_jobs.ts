/**
 * Warm agents on the daemon: a job whose run completed leaves its agent and
 * its MCP proxy alive, idle, in the daemon's own pool; the hub's next job on
 * that session (a later message, or a follow-up) takes them and only sends
 * `session/prompt`. The proxy keeps its URL for the agent's whole life but
 * forwards through the job that holds the agent now, so the hub answers with
 * that run's assets. See `docs/daemon.md` and `docs/runs.md`.
 *
 * @module
 */

import type { AgentLaunch } from "../agent/launch.ts";
import type { ReaperRegistry } from "../agent/reaper.ts";
import { launchLocal } from "../locations/local.ts";
import { type McpProxy, startMcpProxy } from "../mcp_proxy.ts";
import type { Json } from "../relay.ts";
import type { DaemonJobPlan } from "../relay/payload.ts";
import type { AgentTransport, WarmSlot } from "../run/engine.ts";
import type { AgentCompanion, WarmPool } from "../run/warm_pool.ts";
import { createWarmLaunch, warmTargetKey } from "../run/warm_slot.ts";
import type { DaemonJob } from "./session.ts";

/** Options for {@linkcode launchJobAgent}. */
export interface JobLaunchOptions {
  /** The daemon's warm pool, if it keeps one. */
  pool?: WarmPool;
  /** The hub's job. */
  job: DaemonJob;
  /** The job's mapped payload. */
  plan: DaemonJobPlan;
  /** The agent command and environment. */
  launch: AgentLaunch;
  /** Records the job's agent groups. */
  registry: ReaperRegistry;
  /** SIGTERM→SIGKILL grace at teardown, in ms. */
  killGraceMs: number;
  /** Structured log. */
  log: (entry: Record<string, unknown>) => void;
}

/** How a job's agent starts (or is taken warm) and what the job must clean up. */
export interface JobLaunch {
  /** The engine's `launch`. */
  launch(signal: AbortSignal): Promise<AgentTransport>;
  /** The engine's `warm`, when the pool may hold the agent. */
  warm?: WarmSlot;
  /** The launch's transport, once the engine asked for it. */
  launched(): Promise<AgentTransport> | undefined;
  /** Whether the job's agent went to the pool (then it is not torn down). */
  kept(): boolean;
  /** Ends the job's hold on its proxy; closes a proxy the pool did not take. */
  finish(): Promise<void>;
}

/** A warm agent's MCP proxy, forwarding through the job that holds the agent. */
interface WarmProxy extends AgentCompanion {
  proxy: McpProxy;
  /** Forwards through `job` from now on; undefined: answer that no run holds it. */
  hold(job: DaemonJob | undefined): void;
  /** The job forwarding now. */
  holder(): DaemonJob | undefined;
}

/** Starts a proxy whose requests go through whichever job holds it. */
function startWarmProxy(job: DaemonJob, timeoutMs: number): WarmProxy {
  let holder: DaemonJob | undefined = job;
  const proxy = startMcpProxy({
    timeoutMs,
    forward(payload: Json) {
      if (!holder) {
        return Promise.reject(new Error("no run holds this agent now"));
      }
      // The client's request ends with the proxy's: it holds the keep-alive.
      return holder.mcp(payload, timeoutMs);
    },
  });
  return {
    proxy,
    hold: (next) => holder = next,
    holder: () => holder,
    stop: () => proxy.close(),
  };
}

/** Prepares the job's agent: started here, or taken from the warm pool. */
export function launchJobAgent(options: JobLaunchOptions): JobLaunch {
  const { pool, job, plan } = options;
  let proxy: WarmProxy | undefined;
  let launched: Promise<AgentTransport> | undefined;
  const coldLaunch = () => {
    if (plan.assetsEnabled) {
      proxy = startWarmProxy(job, plan.mcpRequestTimeoutMs);
      options.log({ msg: "mcp proxy started", mcp_proxy: proxy.proxy.url });
    }
    const entry = proxy?.proxy.serverEntry;
    launched = launchLocal({
      launch: options.launch,
      registry: options.registry,
      killGraceMs: options.killGraceMs,
    }).then((transport) => ({
      ...transport,
      mcpServers: entry ? [entry] : undefined,
    }));
    return launched;
  };
  const warm = pool?.enabled && plan.config.reuseSession
    ? createWarmLaunch({
      pool,
      target: warmTargetKey(targetParts(plan, options.launch)),
      labels: {
        conversation: "",
        provider: plan.config.provider,
        location: "daemon",
      },
      storedSessionId: plan.storedSessionId,
      launch: coldLaunch,
      adopt(companion) {
        const adopted = companion as WarmProxy | undefined;
        adopted?.hold(job);
        return {
          release: () => {
            if (adopted?.holder() === job) adopted.hold(undefined);
          },
        };
      },
      keepCompanion: () => proxy,
      log: options.log,
    })
    : undefined;
  return {
    launch: warm?.launch ?? coldLaunch,
    warm: warm?.slot,
    launched: () => launched,
    kept: () => warm?.kept ?? false,
    async finish() {
      warm?.release();
      if (!proxy) return;
      // A kept proxy stays with its agent, serving nobody until the next job.
      proxy.hold(undefined);
      if (!warm?.kept) await proxy.stop();
    },
  };
}

/** Everything that makes a daemon job's target. */
function targetParts(
  plan: DaemonJobPlan,
  launch: AgentLaunch,
): Record<string, unknown> {
  const { config } = plan;
  return {
    provider: config.provider,
    argv: launch.argv,
    cwd: launch.cwd,
    env: launch.env,
    sessionCwd: plan.sessionCwd,
    fs: [config.fsRead, config.fsWrite],
    session: [
      config.model,
      config.mode,
      config.sessionConfigJson,
      config.authMethod,
    ],
    mcp: [plan.mcpServers, plan.assetsEnabled],
  };
}
