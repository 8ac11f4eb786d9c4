/**
 * The warm pool: agents kept alive, idle, between the runs of a conversation
 * (`docs/runs.md`, "Warm agents"). An agent is keyed by everything that makes
 * its target plus its session; a run with the same key takes it instead of
 * starting one. Bounded by an idle timeout and a size (least recently used
 * goes first); idle agents are torn down exactly like finished ones.
 *
 * @module
 */

import type { SessionState } from "../../acp/session_state.ts";
import type { PromptCapabilities } from "@agentclientprotocol/sdk";
import { RunnerError } from "../../errors.ts";
import { closeIdleSession } from "./close.ts";
import type { SharedAgent } from "./transport.ts";

/** What lives exactly as long as a warm agent besides its process (its MCP endpoint). */
export interface AgentCompanion {
  /** Stops it once the agent is torn down. */
  stop(): void | Promise<void>;
}

/** An agent handed to the pool when its run completed. */
export interface IdleAgentSpec {
  /** Its id from an earlier stay in the pool (a new one otherwise). */
  id?: string;
  /** The pool key: the target and the session. */
  key: string;
  /** The conversation (or, on a daemon, the session) it serves, for listings. */
  conversation: string;
  /** The provider, for listings. */
  provider: string;
  /** The location, for listings. */
  location: string;
  /** The ACP session the agent holds open. */
  sessionId: string;
  /** What prompt content the agent accepts, from its `initialize`. */
  promptCapabilities?: PromptCapabilities;
  /** The session's choices and values in force when it was kept. */
  sessionState?: SessionState;
  /** Whether the agent advertised `sessionCapabilities.close` (then evictions close the session). */
  canCloseSession?: boolean;
  /** The agent's shared streams. */
  agent: SharedAgent;
  /**
   * The conversation's run whose turn its session took last; a run whose
   * store names another last run takes it no more (the session missed turns).
   */
  lastRunId?: string;
  /** Its MCP endpoint or proxy. */
  companion?: AgentCompanion;
}

/** An agent in the pool (idle), or taken from it by a run. */
export interface IdleAgent extends IdleAgentSpec {
  /** Stable id for `GET`/`DELETE /v1/agents/{id}`, kept for the agent's life. */
  id: string;
  /** When it went idle (ms since the epoch). */
  idleSince: number;
}

/** One warm agent as `GET /v1/agents` shows it. */
export interface WarmAgentInfo {
  agent_id: string;
  conversation_id: string;
  provider: string;
  location: string;
  session_id: string;
  idle_since: string;
}

/** Why warm agents were stopped, for `/metrics`. */
export type EvictionReason =
  | "idle_timeout"
  | "lru"
  | "exited"
  | "unusable"
  | "replaced"
  | "stale"
  | "deleted"
  | "shutdown";

/** Counters and the current size, for `/metrics`. */
export interface WarmPoolStats {
  /** Runs that took a warm agent. */
  hits: number;
  /** Runs that could have and found none. */
  misses: number;
  /** Warm agents stopped, by reason. */
  evictions: Partial<Record<EvictionReason, number>>;
  /** Idle agents now. */
  size: number;
}

/** What the HTTP API may see and do with a pool. */
export interface WarmAgentsView {
  /** The idle agents, least recently used first. */
  list(): WarmAgentInfo[];
  /** Stops one idle agent; false when no idle agent has that id. */
  stop(agentId: string): Promise<boolean>;
  /** Stops the idle agents of a conversation (its sessions were forgotten). */
  forgetConversation(conversationId: string): Promise<number>;
  /** Counters for `/metrics`. */
  stats(): WarmPoolStats;
}

/** The pool. */
export interface WarmPool extends WarmAgentsView {
  /** False when `agent-idle-timeout` or `max-warm-agents` is 0. */
  readonly enabled: boolean;
  /**
   * Takes the idle agent of `key` (the target and `sessionId`) if it is still
   * alive; other idle agents holding `sessionId` are stopped as stale.
   */
  take(key: string, sessionId: string): Promise<IdleAgent | undefined>;
  /**
   * Marks a session as opened by a run until the returned release is called:
   * no other agent holding it is kept meanwhile (it would miss that run).
   */
  claim(sessionId: string): () => void;
  /**
   * Whether {@linkcode keep} would take an agent holding `sessionId` now
   * (`claimed`: the asking run holds a claim on it itself).
   */
  accepts(sessionId: string, claimed: boolean): boolean;
  /** Adds an agent (evicting the least recently used past the limit). */
  keep(spec: IdleAgentSpec): void;
  /** Tears down an agent a run took but could not keep. */
  discard(
    agent: Pick<IdleAgentSpec, "agent" | "companion" | "id">,
  ): Promise<void>;
  /** Stops every idle agent and refuses new ones; resolves when all are gone. */
  close(): Promise<void>;
}

/** How long and how many agents a runner keeps warm. */
export interface WarmPoolSettings {
  /** Seconds an agent may stay idle (`agent-idle-timeout`; 0: the pool is off). */
  idleTimeout: number;
  /** Idle agents at most (`max-warm-agents`; 0: the pool is off). */
  maxAgents: number;
}

/** Options for {@linkcode createWarmPool}. */
export interface WarmPoolOptions extends WarmPoolSettings {
  /** Structured log. */
  log?: (entry: Record<string, unknown>) => void;
}

/** The pool's state. */
interface PoolState {
  options: WarmPoolOptions;
  log: (entry: Record<string, unknown>) => void;
  /** Idle agents by key, least recently used first. */
  idle: Map<string, IdleAgent>;
  timers: Map<string, ReturnType<typeof setTimeout>>;
  stopping: Set<Promise<void>>;
  /** Runs that opened each session, by session id. */
  claims: Map<string, number>;
  stats: Omit<WarmPoolStats, "size">;
  closed: boolean;
}

/** The longest delay `setTimeout` honours (about 24.8 days). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Checks `agent-idle-timeout` and `max-warm-agents` (of `runner serve` and
 * `runner daemon`); throws `config.invalid` naming the option.
 */
export function checkWarmPoolOptions(
  options: WarmPoolSettings,
): void {
  const { idleTimeout, maxAgents } = options;
  if (!Number.isFinite(idleTimeout) || idleTimeout < 0) {
    throw new RunnerError(
      "config.invalid",
      "agent-idle-timeout: must be a number of seconds (0 turns warm agents off).",
    );
  }
  if (idleTimeout * 1000 > MAX_TIMER_MS) {
    throw new RunnerError(
      "config.invalid",
      "agent-idle-timeout: must be at most 2147483 seconds (0 turns warm agents off).",
    );
  }
  if (!Number.isInteger(maxAgents) || maxAgents < 0) {
    throw new RunnerError(
      "config.invalid",
      "max-warm-agents: must be a whole number (0 turns warm agents off).",
    );
  }
}

/** Makes a warm pool. */
export function createWarmPool(options: WarmPoolOptions): WarmPool {
  const state: PoolState = {
    options,
    log: options.log ?? (() => {}),
    idle: new Map(),
    timers: new Map(),
    stopping: new Set(),
    claims: new Map(),
    stats: { hits: 0, misses: 0, evictions: {} },
    closed: false,
  };
  const enabled = options.idleTimeout > 0 && options.maxAgents > 0;
  return {
    enabled,
    take: (key, sessionId) => takeAgent(state, key, sessionId),
    claim: (sessionId) => claimSession(state, sessionId),
    accepts: (sessionId, claimed) =>
      enabled && !state.closed &&
      (state.claims.get(sessionId) ?? 0) <= (claimed ? 1 : 0),
    keep: (spec) => keepAgent(state, spec),
    discard: (agent) => stopAgent(state, agent),
    list: () => [...state.idle.values()].map(describe),
    async stop(agentId) {
      const agent = [...state.idle.values()].find((a) => a.id === agentId);
      if (!agent) return false;
      await evict(state, agent, "deleted");
      return true;
    },
    async forgetConversation(conversationId) {
      const agents = [...state.idle.values()].filter((agent) =>
        agent.conversation === conversationId
      );
      await Promise.all(agents.map((agent) => evict(state, agent, "deleted")));
      return agents.length;
    },
    stats: () => ({ ...state.stats, size: state.idle.size }),
    async close() {
      state.closed = true;
      const agents = [...state.idle.values()];
      await Promise.all(agents.map((agent) => evict(state, agent, "shutdown")));
      await Promise.all([...state.stopping]);
    },
  };
}

function claimSession(state: PoolState, sessionId: string): () => void {
  const { claims } = state;
  claims.set(sessionId, (claims.get(sessionId) ?? 0) + 1);
  let released = false;
  return () => {
    if (released) return;
    released = true;
    const left = (claims.get(sessionId) ?? 1) - 1;
    if (left > 0) claims.set(sessionId, left);
    else claims.delete(sessionId);
  };
}

function describe(agent: IdleAgent): WarmAgentInfo {
  return {
    agent_id: agent.id,
    conversation_id: agent.conversation,
    provider: agent.provider,
    location: agent.location,
    session_id: agent.sessionId,
    idle_since: new Date(agent.idleSince).toISOString(),
  };
}

async function takeAgent(
  state: PoolState,
  key: string,
  sessionId: string,
): Promise<IdleAgent | undefined> {
  const agent = state.idle.get(key);
  if (agent) removeIdle(state, agent);
  // Another target holding this session would miss what this run adds to it.
  for (const other of [...state.idle.values()]) {
    if (other.sessionId === sessionId) evict(state, other, "stale");
  }
  // Let an exit or end of output that already happened be noticed first.
  await new Promise((resolve) => setTimeout(resolve, 0));
  const problem: EvictionReason | undefined = !agent
    ? undefined
    : agent.agent.gone
    ? "exited"
    : agent.agent.unusable
    ? "unusable"
    : undefined;
  if (agent && problem) {
    count(state, problem);
    state.log({
      msg: "warm agent dropped",
      agent_id: agent.id,
      reason: problem,
    });
    stopAgent(state, agent);
  }
  if (!agent || problem) {
    state.stats.misses++;
    return undefined;
  }
  state.stats.hits++;
  return agent;
}

function keepAgent(state: PoolState, spec: IdleAgentSpec): void {
  const previous = state.idle.get(spec.key);
  if (previous) evict(state, previous, "replaced");
  while (state.idle.size >= state.options.maxAgents) {
    evict(state, state.idle.values().next().value!, "lru");
  }
  const agent: IdleAgent = {
    ...spec,
    id: spec.id ?? crypto.randomUUID(),
    idleSince: Date.now(),
  };
  state.idle.set(spec.key, agent);
  const timer = setTimeout(
    () => evict(state, agent, "idle_timeout"),
    Math.min(state.options.idleTimeout * 1000, MAX_TIMER_MS),
  );
  Deno.unrefTimer(timer);
  state.timers.set(agent.id, timer);
  agent.agent.spoiled.then(() => {
    if (state.idle.get(agent.key) !== agent) return;
    evict(state, agent, agent.agent.gone ? "exited" : "unusable");
  });
  state.log({
    msg: "agent kept warm",
    agent_id: agent.id,
    conversation_id: agent.conversation,
    idle: state.idle.size,
  });
}

function removeIdle(state: PoolState, agent: IdleAgent): void {
  if (state.idle.get(agent.key) === agent) state.idle.delete(agent.key);
  clearTimeout(state.timers.get(agent.id));
  state.timers.delete(agent.id);
}

function count(state: PoolState, reason: EvictionReason): void {
  state.stats.evictions[reason] = (state.stats.evictions[reason] ?? 0) + 1;
}

/** Removes an idle agent and tears it down. */
function evict(
  state: PoolState,
  agent: IdleAgent,
  reason: EvictionReason,
): Promise<void> {
  if (state.idle.get(agent.key) !== agent) return Promise.resolve();
  removeIdle(state, agent);
  count(state, reason);
  state.log({
    msg: reason === "exited"
      ? "warm agent exited while idle"
      : "warm agent stopped",
    agent_id: agent.id,
    reason,
  });
  const closing = agent.canCloseSession && CLOSING_REASONS.includes(reason)
    ? closeIdleSession(agent.agent, agent.sessionId, state.log)
    : undefined;
  return stopAgent(state, agent, closing);
}

/** Evictions after which nobody uses the session again (not `stale`, `replaced`). */
const CLOSING_REASONS: EvictionReason[] = [
  "lru",
  "idle_timeout",
  "deleted",
  "shutdown",
];

/** Tears the agent down like a finished run's, then stops its companion. */
function stopAgent(
  state: PoolState,
  agent: Pick<IdleAgentSpec, "agent" | "companion" | "id">,
  closing?: Promise<void>,
): Promise<void> {
  const stopped = (async () => {
    await closing;
    try {
      await agent.agent.teardown();
    } finally {
      await agent.companion?.stop();
    }
    state.log({ msg: "warm agent gone", agent_id: agent.id });
  })().catch((error) =>
    state.log({ msg: "warm agent teardown failed", error: String(error) })
  );
  state.stopping.add(stopped);
  stopped.finally(() => state.stopping.delete(stopped));
  return stopped;
}
