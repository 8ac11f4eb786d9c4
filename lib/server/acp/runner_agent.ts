/**
 * The agent an `/acp` client sees: the runner fronting the real one. A
 * session is a conversation, a prompt is a run (recorded, listed in
 * `/v1/runs`, under the runner's limits), the agent's `session/update`s are
 * passed on as it sent them (secrets redacted), permission requests the
 * operator's policy leaves to a person (`ask`) go to the client, and `fs/*`
 * and `terminal/*` are answered on the agent's side by the run. See
 * `docs/acp-endpoint.md`.
 *
 * @module
 */

import * as acp from "@agentclientprotocol/sdk";
import type {
  PermissionOption,
  RequestPermissionRequest,
  SessionConfigOption,
  SessionInfo,
  SessionUpdate,
  StopReason,
} from "@agentclientprotocol/sdk";
import { RunnerError, toRunnerError } from "../../errors.ts";
import type { RunEvent } from "../../events.ts";
import type { ManagedRun } from "../../run/manager.ts";
import type { RunRequest } from "../../run/request.ts";
import { createLiveUpdateRedactor } from "../../run/live_updates.ts";
import { redactSecrets } from "../../secrets.ts";
import type { ServerContext } from "../context.ts";
import { serveSessionChoices } from "../policy.ts";
import { cancelTurn, takeConversation } from "./fleet_conversation.ts";
import { promptInput } from "./prompt_input.ts";
import {
  ACP_META_KEY,
  type CallerKeys,
  initializeAnswer,
  metaKeys,
  resolveTarget,
  type TargetDescriber,
} from "./target.ts";
import { runTranscript } from "./transcript.ts";
import {
  createUpdateForwarder,
  type UpdateForwarder,
} from "./update_forwarder.ts";

/** The prefix of the conversation ids `/acp` sessions get. */
export const ACP_CONVERSATION_PREFIX = "acp-";

/** Conversations kept in memory at most (the oldest is forgotten first; the store keeps them all). */
const MAX_CONVERSATIONS = 10_000;

/** Runs of one conversation a `session/load` replays at most. */
const MAX_REPLAYED_RUNS = 200;

/** One conversation as `/acp` keeps it between prompts. */
interface Conversation {
  /** The caller keys its runs are resolved with (URL query, `_meta`, set_mode, …). */
  keys: CallerKeys;
  /** The last config options the agent reported. */
  configOptions: SessionConfigOption[];
}

/** What every `/acp` connection of one server shares. */
export interface AcpAgentShared {
  /** The server's route context (store, manager, config, limits). */
  ctx: ServerContext;
  /** Learns the target's `initialize` answer. */
  describe: TargetDescriber;
  /** Conversations by session id. */
  conversations: Map<string, Conversation>;
}

/** Makes what the connections of one server share. */
export function createAcpAgentShared(
  ctx: ServerContext,
  describe: TargetDescriber,
): AcpAgentShared {
  return { ctx, describe, conversations: new Map() };
}

/** One connection's view: its keys and the conversations it reaches. */
interface ConnectionScope {
  shared: AcpAgentShared;
  /** The URL query's keys. */
  connectionKeys: CallerKeys;
  /** The conversation of a session id: in memory, or stored (a restart, another replica). */
  conversationOf(sessionId: string, meta: unknown): Promise<Conversation>;
  /** Keeps a conversation (forgetting the oldest past the cap). */
  remember(sessionId: string, conversation: Conversation): void;
}

/**
 * The agent app of one `/acp` connection, whose URL query narrowed the
 * operator's target with `connectionKeys`.
 */
export function createRunnerAgent(
  shared: AcpAgentShared,
  connectionKeys: CallerKeys,
): acp.AgentApp {
  const scope = connectionScope(shared, connectionKeys);
  const app = acp.agent({ name: "runner" });
  registerSessionLifecycle(app, scope);
  registerSessionTurns(app, scope);
  return app;
}

function connectionScope(
  shared: AcpAgentShared,
  connectionKeys: CallerKeys,
): ConnectionScope {
  const { ctx, conversations } = shared;
  const remember = (sessionId: string, conversation: Conversation) => {
    conversations.delete(sessionId);
    conversations.set(sessionId, conversation);
    if (conversations.size > MAX_CONVERSATIONS) {
      conversations.delete(conversations.keys().next().value!);
    }
  };
  return {
    shared,
    connectionKeys,
    remember,
    async conversationOf(sessionId, meta) {
      const known = conversations.get(sessionId);
      if (known) return known;
      const [latest] = await ctx.store.listRuns({
        conversationId: sessionId,
        limit: 1,
      });
      if (!latest) {
        throw new RunnerError(
          "http.not_found",
          `No conversation ${sessionId}; start one with session/new.`,
        );
      }
      const keys = { ...connectionKeys, ...metaKeys(meta) };
      resolveTarget(ctx.config, keys);
      const conversation = { keys, configOptions: [] };
      remember(sessionId, conversation);
      return conversation;
    },
  };
}

/** Wraps a handler so that its failures reach the client as JSON-RPC errors. */
function guarded<P, R>(
  secrets: string[],
  handler: (params: P, context: Handled) => Promise<R>,
): (context: acp.AgentRequestContext<P>) => Promise<R> {
  return async (context) => {
    try {
      return await handler(context.params, context);
    } catch (error) {
      throw toRequestError(error, secrets);
    }
  };
}

/** `initialize`, `session/new`, `load`, `resume` and `list`. */
function registerSessionLifecycle(app: acp.AgentApp, scope: ConnectionScope) {
  const { shared, connectionKeys } = scope;
  const serve = shared.ctx.config;
  const secrets = shared.ctx.secrets;
  app.onRequest(
    "initialize",
    guarded(secrets, async (params) => {
      const config = resolveTarget(serve, connectionKeys);
      const target = await shared.describe(config);
      return initializeAnswer(config, target, params.protocolVersion);
    }),
  ).onRequest(
    "session/new",
    guarded(secrets, (params) => {
      const keys = { ...connectionKeys, ...metaKeys(params._meta) };
      const config = resolveTarget(serve, keys);
      const sessionId = `${ACP_CONVERSATION_PREFIX}${crypto.randomUUID()}`;
      scope.remember(sessionId, { keys, configOptions: [] });
      return Promise.resolve({
        sessionId,
        _meta: {
          [ACP_META_KEY]: {
            conversation_id: sessionId,
            provider: config.provider,
            location: config.location,
            workspace: config.workspace ?? null,
            ...(params.mcpServers.length
              ? { mcp_servers_ignored: params.mcpServers.length }
              : {}),
          },
        },
      });
    }),
  ).onRequest(
    "session/load",
    guarded(secrets, async (params, { client }) => {
      await scope.conversationOf(params.sessionId, params._meta);
      await replayConversation(shared, params.sessionId, client);
      return { _meta: { [ACP_META_KEY]: { replayed_from: "store" } } };
    }),
  ).onRequest(
    "session/resume",
    guarded(secrets, async (params) => {
      await scope.conversationOf(params.sessionId, params._meta);
      return {};
    }),
  ).onRequest(
    "session/list",
    guarded(secrets, () => listConversations(shared)),
  );
}

/** `session/prompt`, `session/cancel`, `set_mode` and `set_config_option`. */
function registerSessionTurns(app: acp.AgentApp, scope: ConnectionScope) {
  const { shared } = scope;
  const { ctx } = shared;
  app.onRequest(
    "session/set_mode",
    guarded(ctx.secrets, async (params) => {
      const conversation = await scope.conversationOf(
        params.sessionId,
        undefined,
      );
      const keys = { ...conversation.keys, mode: params.modeId };
      resolveTarget(ctx.config, keys);
      conversation.keys = keys;
      return {};
    }),
  ).onRequest(
    "session/set_config_option",
    guarded(ctx.secrets, async (params) => {
      const conversation = await scope.conversationOf(
        params.sessionId,
        undefined,
      );
      const keys = withConfigOption(
        conversation.keys,
        params.configId,
        params.value,
      );
      resolveTarget(ctx.config, keys);
      conversation.keys = keys;
      return { configOptions: conversation.configOptions };
    }),
  ).onRequest(
    "session/prompt",
    guarded(ctx.secrets, async (params, { client, signal }) => {
      const conversation = await scope.conversationOf(
        params.sessionId,
        undefined,
      );
      return await promptRun({
        shared,
        sessionId: params.sessionId,
        conversation,
        input: params.prompt,
        client,
        signal,
      });
    }),
  ).onNotification("session/cancel", ({ params }) => {
    void cancelTurn(ctx, params.sessionId);
  });
}

/** What a guarded handler gets besides its params. */
interface Handled {
  client: acp.AgentContext;
  signal: AbortSignal;
}

/** The keys with one session config option set (`mode` and `model` are those keys). */
function withConfigOption(
  keys: CallerKeys,
  configId: string,
  value: string | boolean,
): CallerKeys {
  if (configId === "mode" || configId === "model") {
    return { ...keys, [configId]: String(value) };
  }
  const current = keys["session-config-json"] ?? keys.session_config_json;
  const object = typeof current === "string"
    ? JSON.parse(current)
    : (current ?? {});
  const { session_config_json: _, ...rest } = keys;
  return {
    ...rest,
    "session-config-json": { ...object, [configId]: value },
  };
}

/** What {@linkcode promptRun} needs. */
interface PromptRunOptions {
  shared: AcpAgentShared;
  sessionId: string;
  conversation: Conversation;
  input: acp.ContentBlock[];
  client: acp.AgentContext;
  signal: AbortSignal;
}

/** The forwarder of a turn of `/acp`, bounded by `--acp-max-buffered-mb`. */
function turnForwarder(
  ctx: ServerContext,
  turn: { client: acp.AgentContext; sessionId: string; runId: () => string },
): UpdateForwarder {
  return createUpdateForwarder({
    client: turn.client,
    sessionId: turn.sessionId,
    maxBytes: ctx.config.acpMaxBufferedMb * 1024 * 1024,
    onFirstDrop: () =>
      ctx.log?.({
        level: "warn",
        msg:
          "acp client not reading: the rest of the turn's updates are dropped for it",
        run_id: turn.runId(),
        conversation_id: turn.sessionId,
      }),
  });
}

/** Runs one prompt as a run of the conversation and answers with its stop reason. */
async function promptRun(
  { shared, sessionId, conversation, input, client }: PromptRunOptions,
): Promise<acp.PromptResponse> {
  const { ctx } = shared;
  let runId = "";
  const forwarder = turnForwarder(ctx, {
    client,
    sessionId,
    runId: () => runId,
  });
  const config = resolveTarget(ctx.config, conversation.keys);
  const passOn = (update: Record<string, unknown>) => {
    if (update.sessionUpdate === "config_option_update") {
      const options = (update as { configOptions?: SessionConfigOption[] })
        .configOptions;
      if (Array.isArray(options)) conversation.configOptions = options;
    }
    forwarder.send(update as SessionUpdate);
  };
  // A daemon redacts with its own run's secrets; this side's (the API and
  // daemon tokens, the operator's env values) are taken out here too, also
  // when the agent cuts one across chunks.
  const hubRedaction = config.location === "daemon"
    ? createLiveUpdateRedactor(() => ctx.secrets)
    : undefined;
  const request: RunRequest = {
    conversationId: sessionId,
    input: promptInput(input),
    config,
    sessionChoices: serveSessionChoices(ctx.config),
    onSessionUpdate: hubRedaction
      ? (raw) => hubRedaction.push(raw).forEach(passOn)
      : passOn,
  };
  await takeConversation(ctx, sessionId);
  const outcome = await ctx.startRun(request, { steer: false });
  const run = outcome.run;
  runId = run.runId;
  let finishReason: string | undefined;
  const asked = new Map<string, AbortController>();
  const unsubscribe = run.subscribe((event) => {
    if (event.type === "run.completed") {
      finishReason = String(event.data.finish_reason ?? "");
    }
    if (event.type === "permission.requested") {
      asked.set(
        String(event.data.request_id),
        askClient({ run, event, sessionId, client }),
      );
    }
    if (event.type === "permission.decided") {
      // Decided by the timeout or a cancel: the client's question is moot.
      const requestId = String(event.data.request_id);
      asked.get(requestId)?.abort();
      asked.delete(requestId);
    }
  });
  let result;
  try {
    result = await run.done;
  } finally {
    unsubscribe();
    for (const waiting of asked.values()) waiting.abort();
  }
  hubRedaction?.end().forEach(passOn);
  await forwarder.flushed();
  return await promptAnswer(ctx, {
    runId: run.runId,
    result,
    finishReason,
    dropped: forwarder.dropped(),
  });
}

/** The answer to a prompt whose run ended with `result`; a failed run throws its failure. */
async function promptAnswer(
  ctx: ServerContext,
  { runId, result, finishReason, dropped }: {
    runId: string;
    result: Awaited<ManagedRun["handle"]["done"]>;
    finishReason: string | undefined;
    dropped: number;
  },
): Promise<acp.PromptResponse> {
  const meta = {
    [ACP_META_KEY]: {
      run_id: runId,
      ...(dropped ? { updates_dropped: dropped } : {}),
    },
  };
  if (result.status === "cancelled") {
    return { stopReason: "cancelled", _meta: meta };
  }
  if (result.status === "completed") {
    return { stopReason: stopReasonOf(finishReason), _meta: meta };
  }
  const record = await ctx.store.getRun(runId);
  throw new RunnerError(
    isRunnerCode(result.code) ? result.code : "acp.prompt_failed",
    record?.error ?? `Run ${runId} failed; GET /v1/runs/${runId} shows why.`,
    { detail: { run_id: runId } },
  );
}

/** What {@linkcode askClient} needs. */
interface AskClientOptions {
  run: ManagedRun;
  event: RunEvent;
  sessionId: string;
  client: acp.AgentContext;
}

/**
 * Asks the client a permission request the operator's policy left to a
 * person and hands its answer to the run; a client that cancels is a
 * rejection, one that errors or never answers meets `permission-timeout`.
 * Returns what withdraws the question.
 */
function askClient(
  { run, event, sessionId, client }: AskClientOptions,
): AbortController {
  const withdrawn = new AbortController();
  const requestId = String(event.data.request_id);
  const toolCall = event.data.tool_call as Record<string, unknown> | undefined;
  const options = (event.data.options as Record<string, unknown>[] ?? []).map((
    option,
  ): PermissionOption => ({
    optionId: String(option.option_id),
    name: String(option.name),
    kind: option.kind as PermissionOption["kind"],
  }));
  const question: RequestPermissionRequest = {
    sessionId,
    toolCall: {
      toolCallId: String(toolCall?.tool_call_id ?? requestId),
      ...(toolCall?.title ? { title: String(toolCall.title) } : {}),
      ...(toolCall?.kind ? { kind: toolCall.kind as acp.ToolKind } : {}),
      ...(Array.isArray(toolCall?.locations) && toolCall.locations.length
        ? { locations: toolCall.locations as acp.ToolCallLocation[] }
        : {}),
      ...(toolCall?.raw_input_summary
        ? { rawInput: toolCall.raw_input_summary }
        : {}),
    },
    options,
  };
  client.request("session/request_permission", question, {
    cancellationSignal: withdrawn.signal,
    stopWaitingOnCancel: true,
  } as acp.SendRequestOptions).then((answer) => {
    if (withdrawn.signal.aborted) return;
    const outcome = answer.outcome;
    try {
      run.handle.answerPermission(
        requestId,
        outcome.outcome === "selected"
          ? { option_id: outcome.optionId }
          : { decision: "reject_once" },
      );
    } catch { /* an option the agent did not offer: left to the timeout */ }
  }, () => {/* no answer: the permission-timeout decides */});
  return withdrawn;
}

/** Replays a conversation's stored runs as `session/update`s, oldest first. */
async function replayConversation(
  shared: AcpAgentShared,
  sessionId: string,
  client: acp.AgentContext,
): Promise<void> {
  const { store } = shared.ctx;
  const runs = await store.listRuns({
    conversationId: sessionId,
    limit: MAX_REPLAYED_RUNS,
  });
  const meta = { [ACP_META_KEY]: { replayed: true } };
  for (const record of runs.reverse()) {
    const events = await store.getEvents(record.runId);
    for (const update of runTranscript(record, events)) {
      await client.notify("session/update", {
        sessionId,
        update,
        _meta: meta,
      });
    }
  }
}

/** The `/acp` conversations, newest first. */
async function listConversations(
  shared: AcpAgentShared,
): Promise<acp.ListSessionsResponse> {
  const runs = await shared.ctx.store.listRuns({ limit: 1000 });
  const sessions = new Map<string, SessionInfo>();
  for (const record of runs) {
    const id = record.conversationId;
    if (!id?.startsWith(ACP_CONVERSATION_PREFIX)) continue;
    const workspace = record.config.workspace;
    const seen = sessions.get(id);
    sessions.set(id, {
      sessionId: id,
      cwd: typeof workspace === "string" ? workspace : "/",
      // Runs come newest first: the oldest run's prompt titles it.
      title: record.prompt?.slice(0, 80) ?? seen?.title ?? null,
      updatedAt: seen?.updatedAt ?? new Date(record.updatedAt).toISOString(),
    });
  }
  for (const id of shared.conversations.keys()) {
    if (!sessions.has(id)) {
      const config = resolveTarget(
        shared.ctx.config,
        shared.conversations.get(id)!.keys,
      );
      sessions.set(id, { sessionId: id, cwd: config.workspace ?? "/" });
    }
  }
  return { sessions: [...sessions.values()] };
}

const STOP_REASONS: readonly StopReason[] = [
  "end_turn",
  "max_tokens",
  "max_turn_requests",
  "refusal",
  "cancelled",
];

function stopReasonOf(reason: string | undefined): StopReason {
  return STOP_REASONS.includes(reason as StopReason)
    ? reason as StopReason
    : "end_turn";
}

function isRunnerCode(code: string | undefined): code is RunnerError["code"] {
  return typeof code === "string" && code.length > 0;
}

/** JSON-RPC codes for the runner's failures. */
const INVALID_PARAMS = -32602;
const INTERNAL_ERROR = -32603;
const RESOURCE_NOT_FOUND = -32002;

/**
 * A failure as the JSON-RPC error the client gets: `-32002` for an unknown
 * conversation, `-32602` for a refused or bad key or prompt, `-32603`
 * otherwise; `data` carries the runner's code and `retryable`.
 */
export function toRequestError(
  error: unknown,
  secrets: string[],
): acp.RequestError {
  if (error instanceof acp.RequestError) return error;
  const failure = toRunnerError(error);
  const jsonRpcCode = failure.code === "http.not_found"
    ? RESOURCE_NOT_FOUND
    : failure.code === "config.invalid" || failure.code === "http.forbidden" ||
        failure.code === "http.bad_request" ||
        failure.code.startsWith("prompt.")
    ? INVALID_PARAMS
    : INTERNAL_ERROR;
  return new acp.RequestError(
    jsonRpcCode,
    redactSecrets(failure.message, secrets),
    {
      code: failure.code,
      retryable: failure.retryable,
      ...(failure.detail ?? {}),
    },
  );
}
