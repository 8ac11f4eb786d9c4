/**
 * The n8n-webhook-compatible endpoint (`POST /v1/webhooks/n8n`), so that
 * LangBot's n8n runner can drive agents: n8n's request fields in, n8n's
 * streaming shape (`{"type":"item","content":…}` … `{"type":"end"}`) or one
 * JSON object out. See `docs/langbot.md`.
 *
 * @module
 */

import type { Context, Hono } from "hono";
import { verify } from "hono/jwt";
import type { RunConfig } from "../config.ts";
import { RunnerError } from "../errors.ts";
import type { RunEvent } from "../events.ts";
import type { ManagedRun, RunManager } from "../run/manager.ts";
import { redactSecrets } from "../secrets.ts";
import type { N8nSettings } from "./config.ts";
import { resolveCallerConfig } from "./policy.ts";
import {
  readJsonObject,
  safeEqual,
  type ServerContext,
  unauthorized,
} from "./context.ts";
import { finalMessage, optionalId, requestedFormat } from "./runs.ts";
import { followRunEvents, textStream } from "./stream.ts";

/** Checks the webhook credentials `settings` require; throws `http.unauthorized`. */
export async function checkN8nAuth(
  c: Context,
  settings: N8nSettings,
): Promise<void> {
  const header = (name: string) => c.req.header(name) ?? "";
  switch (settings.auth) {
    case "none":
      return;
    case "basic": {
      const match = /^Basic\s+(.+)$/i.exec(header("authorization").trim());
      let decoded = "";
      try {
        decoded = match ? atob(match[1]) : "";
      } catch { /* not base64 */ }
      if (!safeEqual(decoded, `${settings.user}:${settings.password}`)) {
        throw unauthorized('Basic realm="runner"');
      }
      return;
    }
    case "header":
      if (!safeEqual(header(settings.headerName!), settings.headerValue!)) {
        throw unauthorized("Header");
      }
      return;
    case "jwt": {
      const match = /^Bearer\s+(.+)$/i.exec(header("authorization").trim());
      if (!match) throw unauthorized();
      try {
        await verify(match[1], settings.jwtSecret!, "HS256");
      } catch {
        throw unauthorized();
      }
      return;
    }
  }
}

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

/** Turns one run event into n8n stream lines (none for most events). */
function n8nItems(
  event: RunEvent,
  state: { streamed: boolean },
  secrets: string[],
): string[] {
  const line = (value: Record<string, unknown>) => JSON.stringify(value) + "\n";
  switch (event.type) {
    case "message.delta": {
      const content = (event.data.chunk as { content?: unknown } | undefined)
        ?.content;
      if (typeof content !== "string" || !content) return [];
      state.streamed = true;
      return [line({ type: "item", content })];
    }
    case "message.completed": {
      const streamed = state.streamed;
      state.streamed = false;
      const content = (event.data.message as { content?: unknown } | undefined)
        ?.content;
      return !streamed && typeof content === "string" && content
        ? [line({ type: "item", content })]
        : [];
    }
    case "run.failed":
      return [
        line({
          type: "error",
          content: redactSecrets(
            String(event.data.error ?? "The run failed."),
            secrets,
          ),
        }),
        line({ type: "end" }),
      ];
    case "run.completed":
      return [line({ type: "end" })];
    default:
      return [];
  }
}

/** Adds `POST /v1/webhooks/n8n`. */
export function registerN8nRoutes(app: Hono, ctx: ServerContext): void {
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
    if (!request.streaming) return await n8nJsonReply(c, { ctx, run });
    return n8nStreamResponse(ctx, run);
  });
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
  const runConfig = resolveCallerConfig(ctx.config, query);
  const streaming = requestedFormat(c, body.stream) !== "json";
  return { text, conversationId, runConfig, streaming };
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

/** The `stream=false` answer: the final message, or a 502 if the run failed. */
async function n8nJsonReply(
  c: Context,
  { ctx, run }: { ctx: ServerContext; run: ManagedRun },
): Promise<Response> {
  const { store, config } = ctx;
  await run.done;
  const events = await store.getEvents(run.runId);
  const record = await store.getRun(run.runId);
  if (record?.status !== "completed") {
    const failed = events.find((event) => event.type === "run.failed");
    return c.json(
      ctx.redact({
        error: {
          code: record?.code ?? "runner.internal",
          message: record?.error ?? "The run failed.",
          retryable: Boolean(failed?.data.retryable),
        },
        run_id: run.runId,
      }),
      502,
    );
  }
  return c.json(
    ctx.redact({
      [config.n8n.outputKey]: finalMessage(events),
      run_id: run.runId,
    }),
  );
}

/** The run's output as n8n's stream of concatenated JSON objects. */
function n8nStreamResponse(ctx: ServerContext, run: ManagedRun): Response {
  const follower = followRunEvents({ store: ctx.store, runId: run.runId, run });
  const state = { streamed: false };
  const queued: string[] = [];
  const body$ = textStream(
    async () => {
      while (!queued.length) {
        const event = await follower.next();
        if (!event) return undefined;
        queued.push(...n8nItems(event, state, ctx.secrets));
      }
      return queued.shift();
    },
    () => follower.close(),
  );
  return new Response(body$, {
    headers: {
      "content-type": "application/json; charset=utf-8",
      "cache-control": "no-cache",
      "x-run-id": run.runId,
    },
  });
}
