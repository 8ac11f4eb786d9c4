/**
 * The n8n-webhook-compatible endpoint (`POST /v1/webhooks/n8n`), so that
 * LangBot's n8n runner can drive agents: n8n's request fields in, n8n's
 * streaming shape (`{"type":"item","content":…}` … `{"type":"end"}`) or one
 * JSON object out. See `docs/langbot.md`.
 *
 * `server/n8n/` owns this one route and what only it needs: its auth modes
 * (`auth.ts`), its `stream=false` answer (`reply.ts`), failures and late
 * answers as items a LangBot user reads (`answers.ts`) and the merging of
 * deltas into fewer, larger items (`delta_merge.ts`). The run itself, the
 * stream and the caller policy are the server's, shared with `/v1/runs`.
 *
 * @module
 */

import type { Context, Hono } from "hono";
import type { RunConfig } from "../../config.ts";
import { RunnerError } from "../../errors.ts";
import type { RunEvent } from "../../events.ts";
import type { ManagedRun, RunManager } from "../../run/manager.ts";
import { redactSecrets } from "../../secrets.ts";
import { checkN8nAuth } from "./auth.ts";
import {
  createPendingAnswers,
  earlierAnswersText,
  failureText,
  type PendingAnswers,
} from "./answers.ts";
import {
  JSON_HEADERS,
  type N8nAnswer,
  type N8nErrorFormat,
  n8nJsonReply,
} from "./reply.ts";
import { resolveCallerConfig, serveSessionChoices } from "../policy.ts";
import { readJsonObject, type ServerContext } from "../context.ts";
import { optionalId, requestedFormat } from "../run_fields.ts";
import { followRunEvents, textStream } from "../stream.ts";
import { mergeDeltas } from "./delta_merge.ts";

/** Options for {@linkcode startWhenConversationIdle}. */
export interface StartWhenIdleOptions<T> {
  /** The run manager that knows the conversation's active run. */
  manager: RunManager;
  /** The conversation. */
  conversationId: string;
  /** The overall deadline, in seconds, however often the wait restarts. */
  seconds: number;
  /**
   * Starts the run once the conversation looks idle; rejects with
   * `http.conversation_busy` when another caller started one first.
   */
  start: () => Promise<T>;
  /** Called each time the caller starts waiting for another run. */
  onWait?: (active: ManagedRun) => void;
}

/**
 * Calls `start` once the conversation has no active run, waiting for at most
 * `seconds` overall; throws `http.conversation_busy` past that. Of several
 * callers woken by the same run's end one starts (the manager starts one
 * conversation's runs one at a time) and the others wait for that new run.
 */
export async function startWhenConversationIdle<T>(
  options: StartWhenIdleOptions<T>,
): Promise<T> {
  const { manager, conversationId, seconds } = options;
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    let active: ManagedRun | undefined;
    while ((active = manager.activeForConversation(conversationId))) {
      options.onWait?.(active);
      await waitForRunEnd({ active, deadline, conversationId, seconds });
    }
    try {
      return await options.start();
    } catch (error) {
      const busy = error instanceof RunnerError &&
        error.code === "http.conversation_busy";
      if (!busy || Date.now() >= deadline) throw error;
    }
  }
}

/** Waits for `active` to end; throws `http.conversation_busy` at the deadline. */
async function waitForRunEnd(
  { active, deadline, conversationId, seconds }: {
    active: ManagedRun;
    deadline: number;
    conversationId: string;
    seconds: number;
  },
): Promise<void> {
  const left = deadline - Date.now();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timedOut = await Promise.race([
    active.done.then(() => false),
    new Promise<boolean>((resolve) =>
      timer = setTimeout(() => resolve(true), Math.max(0, left))
    ),
  ]);
  clearTimeout(timer);
  if (timedOut) {
    throw new RunnerError(
      "http.conversation_busy",
      `Conversation ${conversationId} still has an active run (${active.runId}) after ${seconds} s; retry later or cancel it (POST /v1/runs/${active.runId}/cancel).`,
    );
  }
}

function firstString(...values: unknown[]): string | undefined {
  for (const value of values) {
    if (typeof value === "string" && value !== "") return value;
    if (typeof value === "number") return String(value);
  }
  return undefined;
}

/** What {@linkcode n8nItems} remembers across a run's events. */
interface N8nItemState {
  /** Whether the current turn's text was streamed as deltas. */
  streamed: boolean;
  /** Whether any item was written (a failure then starts a new paragraph). */
  wrote: boolean;
  /** `item`: a failure is a readable item; `json`: an `error` object. */
  errors: N8nErrorFormat;
}

/** Turns one run event into n8n stream lines (none for most events). */
function n8nItems(
  event: RunEvent,
  state: N8nItemState,
  secrets: string[],
): string[] {
  const line = (value: Record<string, unknown>) => JSON.stringify(value) + "\n";
  const item = (content: string) => {
    state.wrote = true;
    return line({ type: "item", content });
  };
  switch (event.type) {
    case "message.delta": {
      const content = (event.data.chunk as { content?: unknown } | undefined)
        ?.content;
      if (typeof content !== "string" || !content) return [];
      state.streamed = true;
      return [item(content)];
    }
    case "message.completed": {
      const streamed = state.streamed;
      state.streamed = false;
      const content = (event.data.message as { content?: unknown } | undefined)
        ?.content;
      return !streamed && typeof content === "string" && content
        ? [item(content)]
        : [];
    }
    case "run.failed": {
      const failure = state.errors === "json"
        ? line({
          type: "error",
          content: redactSecrets(
            String(event.data.error ?? "The run failed."),
            secrets,
          ),
          code: event.data.code ?? "runner.internal",
          retryable: Boolean(event.data.retryable),
        })
        : item((state.wrote ? "\n\n" : "") + failureText(event, secrets));
      return [failure, line({ type: "end" })];
    }
    case "run.completed":
      return [line({ type: "end" })];
    default:
      return [];
  }
}

/** Adds `POST /v1/webhooks/n8n`. */
export function registerN8nRoutes(app: Hono, ctx: ServerContext): void {
  const pending = createPendingAnswers();
  app.post("/v1/webhooks/n8n", async (c) => {
    await checkN8nAuth(c, ctx.config.n8n);
    const body = await readJsonObject(c);
    const request = parseN8nRequest(c, { body, ctx });
    const forwarded = await ctx.fleet?.forConversation(
      c,
      request.conversationId,
    );
    if (forwarded) return forwarded;
    const run = await startN8nRun(ctx, request);
    ctx.log({
      msg: "n8n webhook run",
      run_id: run.runId,
      conversation_id: request.conversationId,
      streaming: request.streaming,
    });
    const answer = await n8nAnswer(ctx, { run, request, pending });
    if (!request.streaming) return await n8nJsonReply(c, answer);
    return n8nStreamResponse(answer);
  });
}

/** Takes the conversation's undelivered answers to go ahead of this call's own. */
async function n8nAnswer(
  ctx: ServerContext,
  { run, request, pending }: {
    run: ManagedRun;
    request: N8nRequest;
    pending: PendingAnswers;
  },
): Promise<N8nAnswer> {
  const { conversationId } = request;
  const earlier = conversationId ? pending.take(conversationId) : [];
  return {
    ctx,
    run,
    errors: request.errors,
    preface: await earlierAnswersText(ctx.store, {
      runIds: earlier,
      secrets: ctx.secrets,
    }),
    undelivered(prefaceSent) {
      if (!conversationId) return;
      ctx.log({
        msg: "n8n caller left before the answer; it goes ahead of the next one",
        run_id: run.runId,
        conversation_id: conversationId,
      });
      pending.add(conversationId, [
        ...(prefaceSent ? [] : earlier),
        run.runId,
      ]);
    },
  };
}

/** What a webhook call asks for. */
interface N8nRequest {
  /** The user's message. */
  text: string;
  /** The conversation, when the caller names one. */
  conversationId?: string;
  /** The run config from the query string over the server defaults. */
  runConfig: RunConfig;
  /** Whether to answer with n8n's stream rather than one JSON object. */
  streaming: boolean;
  /** How a failure is reported (`?errors=`). */
  errors: N8nErrorFormat;
}

/** Reads a webhook call's message, conversation, run config and format. */
function parseN8nRequest(
  c: Context,
  { body, ctx }: { body: Record<string, unknown>; ctx: ServerContext },
): N8nRequest {
  const text = firstString(
    body.chatInput,
    body.message,
    body.user_message_text,
  );
  if (!text) {
    throw new RunnerError(
      "config.invalid",
      "The webhook body needs chatInput (or message, or user_message_text).",
    );
  }
  const conversationId = optionalId(
    firstString(body.conversation_id, body.session_id),
    "conversation_id",
  );
  const query = { ...c.req.query() };
  delete query.stream;
  delete query.errors;
  const errors = c.req.query("errors") ?? "item";
  if (errors !== "item" && errors !== "json") {
    throw new RunnerError(
      "http.bad_request",
      "errors must be item (a readable failure item, the default) or json.",
    );
  }
  const runConfig = resolveCallerConfig(ctx.config, query);
  const streaming = requestedFormat(c, body.stream) !== "json";
  return { text, conversationId, runConfig, streaming, errors };
}

/** Starts the webhook's run, first waiting for the conversation to be idle. */
async function startN8nRun(
  ctx: ServerContext,
  request: N8nRequest,
): Promise<ManagedRun> {
  const { conversationId } = request;
  const start = () =>
    ctx.startRun({
      conversationId,
      input: { text: request.text },
      config: request.runConfig,
      sessionChoices: serveSessionChoices(ctx.config),
      permissionAskUnavailable:
        "the n8n webhook has no way to answer permission requests",
    }, { steer: false });
  const { run } = conversationId
    ? await startWhenConversationIdle({
      manager: ctx.manager,
      conversationId,
      seconds: ctx.config.n8n.waitSeconds,
      start,
      onWait: (active) =>
        ctx.log({
          msg: "n8n webhook waits for the conversation",
          conversation_id: conversationId,
          active_run_id: active.runId,
        }),
    })
    : await start();
  return run;
}

const END_LINE = JSON.stringify({ type: "end" }) + "\n";

/** The run's output as n8n's stream of JSON objects, one per line. */
function n8nStreamResponse(answer: N8nAnswer): Response {
  const { ctx, run } = answer;
  const follower = mergeDeltas(
    followRunEvents({ store: ctx.store, runId: run.runId, run }),
    ctx.config.n8n.mergeMs,
  );
  const state: N8nItemState = {
    streamed: false,
    wrote: false,
    errors: answer.errors,
  };
  const queued: string[] = answer.preface
    ? [JSON.stringify({ type: "item", content: answer.preface }) + "\n"]
    : [];
  let prefaceSent = !answer.preface;
  let ended = false;
  const body = textStream(
    async () => {
      while (!queued.length) {
        const event = await follower.next();
        if (!event) return undefined;
        queued.push(...n8nItems(event, state, ctx.secrets));
      }
      const line = queued.shift()!;
      prefaceSent = true;
      if (line === END_LINE) ended = true;
      return line;
    },
    () => {
      follower.close();
      if (!ended) answer.undelivered(prefaceSent);
    },
    { keepalive: "\n", keepaliveMs: ctx.config.keepaliveSeconds * 1000 },
  );
  return new Response(body, {
    headers: { ...JSON_HEADERS, "x-run-id": run.runId },
  });
}
