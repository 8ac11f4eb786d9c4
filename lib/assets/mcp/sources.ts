/**
 * Remote asset sources: an upstream MCP endpoint the runner forwards
 * `tools/call` to, and a signed HTTP callback. Both only ever see calls the
 * run's grant already allowed.
 *
 * @module
 */

import {
  CALLBACK_SIGNATURE_HEADER,
  CALLBACK_TIMESTAMP_HEADER,
  signCallbackBody,
} from "./callback_signature.ts";
import { type CallToolResult, toolFailure, toolSuccess } from "./tools.ts";

// Callback receivers (and docs/assets.md) know the signing helpers by this module.
export {
  CALLBACK_SIGNATURE_HEADER,
  CALLBACK_TIMESTAMP_HEADER,
  type CallbackVerification,
  DEFAULT_CALLBACK_TOLERANCE_SECONDS,
  signCallbackBody,
  verifyCallbackSignature,
} from "./callback_signature.ts";

/** Forwards an authorized asset tool call and returns the tool result. */
export interface RemoteSource {
  /** Calls `tool` with `args` (never containing `run_token`). */
  callTool(
    tool: string,
    args: Record<string, unknown>,
  ): Promise<CallToolResult>;
}

/** The default deadline of one forwarded call, in milliseconds. */
export const DEFAULT_SOURCE_TIMEOUT_MS = 60_000;

const MCP_PROTOCOL_VERSION = "2025-06-18";

class SourceError extends Error {}

async function withDeadline<T>(
  timeoutMs: number,
  work: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const controller = new AbortController();
  const timer = setTimeout(
    () => controller.abort(new SourceError("timed out")),
    timeoutMs,
  );
  try {
    return await work(controller.signal);
  } catch (error) {
    if (controller.signal.aborted) {
      throw new SourceError(`no answer within ${timeoutMs} ms`);
    }
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

function describeFailure(error: unknown): string {
  if (error instanceof SourceError) return error.message;
  if (error instanceof TypeError) return "could not connect";
  return error instanceof Error ? error.message : String(error);
}

/** Reads an SSE body until the JSON-RPC response with `id` arrives. */
async function readSseResponse(
  body: ReadableStream<Uint8Array>,
  id: number,
): Promise<unknown> {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  try {
    while (true) {
      const { done, value } = await reader.read();
      if (value) buffer += value.replaceAll("\r\n", "\n");
      let boundary;
      while (
        (boundary = buffer.indexOf("\n\n")) >= 0 ||
        (done && buffer.trim() !== "")
      ) {
        const block = boundary >= 0 ? buffer.slice(0, boundary) : buffer;
        buffer = boundary >= 0 ? buffer.slice(boundary + 2) : "";
        const data = block.split("\n").filter((line) =>
          line.startsWith("data:")
        )
          .map((line) => line.slice(5).replace(/^ /, "")).join("\n");
        if (data === "") continue;
        const message = JSON.parse(data);
        if (message?.id === id) return message;
      }
      if (done) {
        throw new SourceError("the event stream ended without a response");
      }
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}

/** Options for {@linkcode createUpstreamSource}. */
export interface UpstreamSourceOptions {
  /** The upstream MCP endpoint (Streamable HTTP). */
  url: string;
  /** Headers sent with every request (e.g. the upstream's run token). */
  headers?: Record<string, string>;
  /** Deadline per request. */
  timeoutMs?: number;
}

/** The state of one upstream MCP client, shared by its calls. */
interface UpstreamSession {
  /** Where and how to reach the upstream. */
  options: UpstreamSourceOptions;
  /** Deadline per request. */
  timeoutMs: number;
  /** The next JSON-RPC request id. */
  nextId: number;
  /** The upstream's `Mcp-Session-Id`, once it gave one. */
  sessionId?: string;
  /** The handshake, once started (cleared when it fails or the session is gone). */
  initialized?: Promise<void>;
}

/**
 * An MCP client for the upstream endpoint: initializes once (keeping any
 * `Mcp-Session-Id`, re-initializing once if the session is gone), then
 * forwards `tools/call`. Accepts JSON or SSE answers.
 */
export function createUpstreamSource(
  options: UpstreamSourceOptions,
): RemoteSource {
  const session: UpstreamSession = {
    options,
    timeoutMs: options.timeoutMs ?? DEFAULT_SOURCE_TIMEOUT_MS,
    nextId: 1,
  };
  return {
    async callTool(tool, args) {
      try {
        let answer;
        try {
          answer = await callUpstream(session, { name: tool, arguments: args });
        } catch (error) {
          if (!(error instanceof SessionGone)) throw error;
          session.sessionId = undefined;
          session.initialized = undefined;
          answer = await callUpstream(session, { name: tool, arguments: args });
        }
        return upstreamToolResult(tool, answer);
      } catch (error) {
        return toolFailure(
          "assets.source_failed",
          `The upstream MCP server failed for ${tool} (${
            describeFailure(error)
          }); retry later.`,
        );
      }
    },
  };
}

/** Sends one JSON-RPC message to the upstream; its response, or null. */
async function postUpstream(
  session: UpstreamSession,
  message: Record<string, unknown>,
): Promise<unknown> {
  return await withDeadline(session.timeoutMs, async (signal) => {
    const headers = new Headers(session.options.headers);
    headers.set("content-type", "application/json");
    headers.set("accept", "application/json, text/event-stream");
    if (message.method !== "initialize") {
      headers.set("mcp-protocol-version", MCP_PROTOCOL_VERSION);
    }
    if (session.sessionId) headers.set("mcp-session-id", session.sessionId);
    const response = await fetch(session.options.url, {
      method: "POST",
      headers,
      body: JSON.stringify(message),
      signal,
    });
    if (message.method === "initialize") {
      session.sessionId = response.headers.get("mcp-session-id") ?? undefined;
    }
    if (response.status === 404 && session.sessionId) {
      await response.body?.cancel();
      throw new SessionGone();
    }
    if (!response.ok) {
      await response.body?.cancel();
      throw new SourceError(
        `the upstream MCP server answered HTTP ${response.status}`,
      );
    }
    if (
      message.id === undefined || response.status === 202 || !response.body
    ) {
      await response.body?.cancel();
      return null;
    }
    const type = response.headers.get("content-type") ?? "";
    if (type.includes("text/event-stream")) {
      return await readSseResponse(response.body, message.id as number);
    }
    return await response.json();
  });
}

/** Runs the MCP handshake once per session; a failed one is retried next call. */
function initializeUpstream(session: UpstreamSession): Promise<void> {
  session.initialized ??= (async () => {
    const answer = await postUpstream(session, {
      jsonrpc: "2.0",
      id: session.nextId++,
      method: "initialize",
      params: {
        protocolVersion: MCP_PROTOCOL_VERSION,
        capabilities: {},
        clientInfo: { name: "runner-langbot-assets", version: "0.1.0" },
      },
    }) as { error?: { message?: string } } | null;
    if (answer?.error) {
      throw new SourceError(
        `the upstream refused initialize: ${answer.error.message ?? "error"}`,
      );
    }
    await postUpstream(session, {
      jsonrpc: "2.0",
      method: "notifications/initialized",
    });
  })();
  session.initialized.catch(() => session.initialized = undefined);
  return session.initialized;
}

/** Forwards one `tools/call`; the raw JSON-RPC response. */
async function callUpstream(
  session: UpstreamSession,
  params: { name: string; arguments: Record<string, unknown> },
): Promise<unknown> {
  await initializeUpstream(session);
  return await postUpstream(session, {
    jsonrpc: "2.0",
    id: session.nextId++,
    method: "tools/call",
    params,
  });
}

/** The tool result an upstream's `tools/call` response stands for. */
function upstreamToolResult(tool: string, answer: unknown): CallToolResult {
  const { result, error } = (answer ?? {}) as {
    result?: unknown;
    error?: { message?: string };
  };
  if (error) {
    return toolFailure(
      "assets.source_failed",
      `The upstream MCP server refused ${tool}: ${error.message ?? "error"}.`,
    );
  }
  return asToolResult(result);
}

class SessionGone extends SourceError {
  constructor() {
    super("the upstream MCP session expired");
  }
}

/** Passes an MCP-shaped result through; anything else becomes a success result. */
function asToolResult(value: unknown): CallToolResult {
  if (
    value !== null && typeof value === "object" && !Array.isArray(value) &&
    Array.isArray((value as CallToolResult).content)
  ) {
    return value as CallToolResult;
  }
  return toolSuccess(value);
}

/** Options for {@linkcode createCallbackSource}. */
export interface CallbackSourceOptions {
  /** Where to POST `{run_id, tool, arguments}`. */
  url: string;
  /** The per-run HMAC secret every request is signed with. */
  secret: string;
  /** The run id sent in the body and `X-Runner-Run-Id`. */
  runId: string;
  /** Deadline per call. */
  timeoutMs?: number;
  /** The clock for `X-Runner-Timestamp`, in ms since the epoch (tests inject one). */
  now?: () => number;
}

/**
 * A callback source: POSTs `{run_id, tool, arguments}` with
 * `X-Runner-Timestamp` and `X-Runner-Signature`; a 2xx JSON answer is the
 * tool result (an MCP result with `content` passes through), anything else
 * is a failure result.
 */
export function createCallbackSource(
  options: CallbackSourceOptions,
): RemoteSource {
  const timeoutMs = options.timeoutMs ?? DEFAULT_SOURCE_TIMEOUT_MS;
  const now = options.now ?? Date.now;
  return {
    async callTool(tool, args) {
      const body = JSON.stringify({
        run_id: options.runId,
        tool,
        arguments: args,
      });
      const timestamp = String(Math.floor(now() / 1000));
      const headers: Record<string, string> = {
        "content-type": "application/json",
        "x-runner-run-id": options.runId,
        [CALLBACK_TIMESTAMP_HEADER]: timestamp,
        [CALLBACK_SIGNATURE_HEADER]: signCallbackBody(
          options.secret,
          timestamp,
          body,
        ),
      };
      try {
        return await withDeadline(timeoutMs, async (signal) => {
          const response = await fetch(options.url, {
            method: "POST",
            headers,
            body,
            signal,
          });
          const text = await response.text();
          if (!response.ok) {
            return toolFailure(
              "assets.source_failed",
              `The run's callback answered HTTP ${response.status} for ${tool}` +
                `${callbackReason(text)}.`,
            );
          }
          try {
            return asToolResult(JSON.parse(text));
          } catch {
            return toolFailure(
              "assets.source_failed",
              `The run's callback answered ${tool} with a body that is not JSON.`,
            );
          }
        });
      } catch (error) {
        return toolFailure(
          "assets.source_failed",
          `The run's callback failed for ${tool} (${
            describeFailure(error)
          }); retry later.`,
        );
      }
    },
  };
}

function callbackReason(text: string): string {
  try {
    const parsed = JSON.parse(text);
    const reason = parsed?.error?.message ?? parsed?.error ?? parsed?.message;
    return typeof reason === "string" ? `: ${reason.slice(0, 300)}` : "";
  } catch {
    return "";
  }
}
