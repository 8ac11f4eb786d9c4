/**
 * Retried `POST /v1/runs`: clients such as `@microsoft/fetch-event-source`
 * send the same body again when a connection drops. A POST is identified by
 * its `run_id` or its `Idempotency-Key` header; a repeat re-attaches to that
 * run (or repeats the answer of a steered POST) and never runs the prompt
 * twice.
 *
 * @module
 */

import { createHash } from "node:crypto";
import type { Context } from "hono";
import { RunnerError } from "../errors.ts";
import type { ManagedRun } from "../run/manager.ts";
import type { ServerContext } from "./context.ts";

/** How many steered POSTs are remembered (oldest forgotten first). */
const MAX_REMEMBERED = 10_000;

/** Printable ASCII, as the `Idempotency-Key` draft asks. */
const KEY_PATTERN = /^[\x21-\x7e][\x20-\x7e]{0,254}$/;

/**
 * The run id a POST names: its `run_id`, else one derived from its
 * `Idempotency-Key` header (`idem-` and 32 hex digits of the key's SHA-256),
 * else undefined (a new id is made).
 *
 * @throws {RunnerError} `http.bad_request` for a malformed key.
 */
export function requestedRunId(
  c: Context,
  runId: string | undefined,
): string | undefined {
  if (runId) return runId;
  const key = c.req.header("idempotency-key");
  if (key === undefined) return undefined;
  if (!KEY_PATTERN.test(key.trim())) {
    throw new RunnerError(
      "http.bad_request",
      "Idempotency-Key must be 1-255 printable ASCII characters.",
    );
  }
  const digest = createHash("sha256").update(key.trim()).digest("hex");
  return `idem-${digest.slice(0, 32)}`;
}

/** POSTs that were steered into a conversation's active run, by their run id. */
export interface SteeredPosts {
  /** The run a POST with this id was steered into, if it was. */
  get(runId: string): string | undefined;
  /** Remembers that the POST with `runId` was steered into `targetRunId`. */
  remember(runId: string, targetRunId: string): void;
}

/** Makes an empty, bounded {@linkcode SteeredPosts}. */
export function createSteeredPosts(): SteeredPosts {
  const steered = new Map<string, string>();
  return {
    get: (runId) => steered.get(runId),
    remember(runId, targetRunId) {
      steered.set(runId, targetRunId);
      if (steered.size > MAX_REMEMBERED) {
        steered.delete(steered.keys().next().value!);
      }
    },
  };
}

/** A run a `POST /v1/runs` answers with: a live one, or a stored one it re-attaches to. */
export interface RunToAnswer {
  /** The run id. */
  runId: string;
  /** The conversation. */
  conversationId?: string;
  /** The live run, when it is active in this process. */
  run?: ManagedRun;
  /** Only events after this sequence (a re-attaching client's Last-Event-ID). */
  after?: number;
}

/** What {@linkcode answerRepeat} looks at. */
export interface RepeatLookup {
  /** The route context (manager and store). */
  ctx: ServerContext;
  /** The POSTs steered so far. */
  steeredPosts: SteeredPosts;
  /** The POST's run id ({@linkcode requestedRunId}). */
  runId: string;
  /** The POST's `conversation_id`. */
  conversationId?: string;
  /** The client's `Last-Event-ID`, when it sent one. */
  after?: number;
}

/**
 * The answer to a repeated POST, if it is one: the steered answer again
 * (202) for a POST that was steered, else the run to re-attach to (from the
 * client's `Last-Event-ID`). A new run id gives undefined.
 *
 * @throws {RunnerError} `http.conflict` when the run belongs to another conversation.
 */
export async function answerRepeat(
  c: Context,
  { ctx, steeredPosts, runId, ...asked }: RepeatLookup,
): Promise<RunToAnswer | Response | undefined> {
  const steeredInto = steeredPosts.get(runId);
  if (steeredInto) return c.json({ run_id: steeredInto, steered: true }, 202);
  const run = ctx.manager.get(runId);
  const record = run ? undefined : await ctx.store.getRun(runId);
  if (!run && !record) return undefined;
  const conversationId = run?.conversationId ?? record?.conversationId;
  if (asked.conversationId && asked.conversationId !== conversationId) {
    throw new RunnerError(
      "http.conflict",
      `run_id ${runId} is a run of ${
        conversationId ? `conversation ${conversationId}` : "no conversation"
      }; use a new run_id, or read that run at GET /v1/runs/${runId}/events.`,
    );
  }
  return { runId, conversationId, run, after: asked.after };
}
