/**
 * A run's place in the warm pool, as the run manager and the daemon's job
 * runner build it: the cold launch wrapped so its agent can be shared, the
 * warm agent taken for the run (with its MCP endpoint handed over to this
 * run), and the agent kept when the run completes. See `docs/runs.md`.
 *
 * @module
 */

import { createHash } from "node:crypto";
import type { AgentTransport, WarmSlot } from "../types.ts";
import type { AgentCompanion, IdleAgent, WarmPool } from "./pool.ts";
import { shareAgent, type SharedAgent } from "./transport.ts";

/** What a run that adopted a warm agent holds of its companion. */
export interface AdoptedCompanion {
  /** Text prepended to the run's first prompt (the run-scope note). */
  promptPrefix?: string;
  /** Ends the run's hold (its grant) when the run ends. */
  release(): void;
}

/** Options for {@linkcode createWarmHold}. */
export interface WarmHoldOptions {
  /** The pool. */
  pool: WarmPool;
  /** Everything that makes the run's target ({@linkcode warmTargetKey}). */
  target: string;
  /** Shown by `GET /v1/agents`. */
  labels: { conversation: string; provider: string; location: string };
  /** The session the store holds for the conversation; nothing is taken without one. */
  storedSessionId?: string;
  /**
   * Set by runs that know the conversation's history: this run, and the
   * conversation's latest run before it in the store. A warm agent whose
   * session took another run's turn last is stopped, not taken (a replica
   * that owned the conversation before missed the turns taken elsewhere).
   */
  history?: { runId: string; previousRunId?: string };
  /** Starts the agent (the location). */
  launch(signal: AbortSignal): Promise<AgentTransport>;
  /** Hands a warm agent's companion to this run (throws for a bad request). */
  adopt?(companion: AgentCompanion | undefined): AdoptedCompanion;
  /** The companion of the agent this run started, once that agent is kept. */
  keepCompanion?(): AgentCompanion | undefined;
  /** Structured log. */
  log: (entry: Record<string, unknown>) => void;
}

/** A run's hold on the warm pool: its cold launch made shareable, its slot, its adopted companion. */
export interface WarmHold {
  /** The cold launch: the location's, with the agent made shareable. */
  launch(signal: AbortSignal): Promise<AgentTransport>;
  /** For the engine's `warm` option. */
  slot: WarmSlot;
  /** Whether the run's agent went to the pool. */
  readonly kept: boolean;
  /** Ends the run's hold on an adopted companion (call when the run ends). */
  release(): void;
}

/** A digest of the values that make a target; equal digests mean the same target. */
export function warmTargetKey(parts: Record<string, unknown>): string {
  return createHash("sha256").update(JSON.stringify(parts)).digest("hex");
}

/**
 * Whether `agent`'s session took another run's turn last than the store's
 * latest run of the conversation; then it is stopped (the session is
 * restored instead).
 */
async function missedTurns(
  agent: IdleAgent,
  options: WarmHoldOptions,
): Promise<boolean> {
  const history = options.history;
  if (!history || agent.lastRunId === history.previousRunId) return false;
  options.log({
    msg: "warm agent missed turns; the session is restored instead",
    agent_id: agent.id,
  });
  await options.pool.discard(agent);
  return true;
}

/** Builds a run's launch and warm slot over `options.pool`. */
export function createWarmHold(options: WarmHoldOptions): WarmHold {
  const { pool, log } = options;
  const keyOf = (sessionId: string) => `${options.target}:${sessionId}`;
  let shared: SharedAgent | undefined;
  let taken: IdleAgent | undefined;
  let adopted: AdoptedCompanion | undefined;
  let kept = false;
  let claim: { sessionId: string; release(): void } | undefined;
  const slot: WarmSlot = {
    async take() {
      const sessionId = options.storedSessionId;
      if (!sessionId || !pool.enabled) return undefined;
      claim = { sessionId, release: pool.claim(sessionId) };
      const agent = await pool.take(keyOf(sessionId), sessionId);
      if (!agent) return undefined;
      if (await missedTurns(agent, options)) return undefined;
      try {
        adopted = options.adopt?.(agent.companion);
      } catch (error) {
        await pool.discard(agent);
        throw error;
      }
      taken = agent;
      shared = agent.agent;
      const view = shared.lend({ quietUntilFirstWrite: true });
      log({ msg: "warm agent taken", agent_id: agent.id });
      return {
        transport: {
          ...view,
          promptPrefix: adopted?.promptPrefix,
          teardown: () => pool.discard(agent),
        },
        sessionId: agent.sessionId,
        promptCapabilities: agent.promptCapabilities,
        sessionState: agent.sessionState,
        canCloseSession: agent.canCloseSession,
      };
    },
    keep({ sessionId, promptCapabilities, sessionState, canCloseSession }) {
      const claimed = claim?.sessionId === sessionId;
      if (!shared || shared.gone || shared.unusable) return false;
      if (!pool.accepts(sessionId, claimed)) return false;
      const companion = taken ? taken.companion : options.keepCompanion?.();
      shared.detach();
      pool.keep({
        id: taken?.id,
        key: keyOf(sessionId),
        ...options.labels,
        sessionId,
        promptCapabilities,
        sessionState,
        canCloseSession,
        agent: shared,
        companion,
        lastRunId: options.history?.runId,
      });
      kept = true;
      return true;
    },
  };
  return {
    async launch(signal) {
      const raw = await options.launch(signal);
      shared = shareAgent(raw, { log });
      return { ...raw, ...shared.lend() };
    },
    slot,
    get kept() {
      return kept;
    },
    release() {
      adopted?.release();
      claim?.release();
    },
  };
}
