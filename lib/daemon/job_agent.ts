/**
 * What a daemon job's agent gets beyond the shared run: its MCP proxy,
 * handed to the run as its assets, and its place in the daemon's warm pool.
 * A job whose run completed leaves its agent and its proxy alive, idle, in
 * the pool; the hub's next job on that session (a later message, or a
 * follow-up) takes them and only sends `session/prompt`. The proxy keeps its
 * URL for the agent's whole life but forwards through the job that holds
 * the agent now, so the hub answers with that run's assets. See
 * `docs/daemon.md` and `docs/runs.md`.
 *
 * @module
 */

import { type McpProxy, startMcpProxy } from "../mcp_proxy.ts";
import type { Json } from "../relay.ts";
import type { DaemonJobPlan } from "../relay/payload.ts";
import type { RunAssetsHook } from "../run/request.ts";
import type { WarmPool } from "../run/warm/pool.ts";
import { sessionSettingsFrom } from "../run/session_memory.ts";
import type { KeptSession, WarmEntrance } from "../run/setup.ts";
import type { DaemonJob } from "./session.ts";

/** Options of {@linkcode createJobMcpAssets}. */
export interface JobMcpAssetsOptions {
  /** The hub's job. */
  job: DaemonJob;
  /** The job's mapped payload. */
  plan: DaemonJobPlan;
  /** The job holding run `runId` now (a kept proxy forwards through it). */
  jobOfRun(runId: string): DaemonJob | undefined;
  /** Structured log. */
  log: (entry: Record<string, unknown>) => void;
}

/** A job's MCP proxy as the run's assets, and the closing of a proxy no pool took. */
export interface JobMcpAssets {
  /** The run's assets (undefined when the payload turns assets off). */
  hook?: RunAssetsHook;
  /** Resolves once a proxy this job started and the pool did not keep is closed. */
  closed(): Promise<void>;
}

/**
 * The job's assets: a proxy whose requests go through whichever job holds
 * it; kept with a warm agent, a later job takes it over (`attach`).
 */
export function createJobMcpAssets(
  options: JobMcpAssetsOptions,
): JobMcpAssets {
  const { job, plan, log } = options;
  let closing: Promise<void> = Promise.resolve();
  if (!plan.assetsEnabled) return { closed: () => closing };
  const hook: RunAssetsHook = {
    prepare() {
      const proxy = startHeldProxy(job, plan.mcpRequestTimeoutMs);
      log({ msg: "mcp proxy started", mcp_proxy: proxy.proxy.url });
      let kept = false;
      const unhold = (holder: DaemonJob) => {
        if (proxy.holder() === holder) proxy.hold(undefined);
      };
      return Promise.resolve({
        mcpServers: [proxy.proxy.serverEntry],
        endpointUrls: [proxy.proxy.url],
        release() {
          unhold(job);
          if (!kept) closing = proxy.proxy.close();
        },
        keep() {
          kept = true;
          return {
            attach({ runId }) {
              const holder = options.jobOfRun(runId);
              proxy.hold(holder);
              return {
                secrets: [],
                release: () => holder && unhold(holder),
              };
            },
            stop: () => proxy.proxy.close(),
          };
        },
      });
    },
  };
  return { hook, closed: () => closing };
}

/** A proxy forwarding through the job that holds it. */
interface HeldProxy {
  proxy: McpProxy;
  /** Forwards through `job` from now on; undefined: answer that no run holds it. */
  hold(job: DaemonJob | undefined): void;
  /** The job forwarding now. */
  holder(): DaemonJob | undefined;
}

function startHeldProxy(job: DaemonJob, timeoutMs: number): HeldProxy {
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
  return { proxy, hold: (next) => holder = next, holder: () => holder };
}

/** The session the hub keeps for the job's conversation, and what it remembers of its config values. */
export function jobKeptSession(plan: DaemonJobPlan): KeptSession {
  return {
    storedSessionId: plan.storedSessionId,
    remembered: plan.sessionMemory && sessionSettingsFrom(plan.sessionMemory),
  };
}

/**
 * What a job tells the warm pool: the same target as a local run's, with
 * the job's MCP servers as the hub sent them; the hub finds the agent again
 * by the session id it keeps, so a job of no conversation has a place too.
 */
export function jobWarmEntrance(
  plan: DaemonJobPlan,
  pool: WarmPool | undefined,
): WarmEntrance {
  return {
    pool,
    mcp: [plan.mcpServers, plan.assetsEnabled],
    location: "daemon",
    withoutConversation: true,
  };
}
