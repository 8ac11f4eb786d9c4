/**
 * The ACP SDK's own client against `runner serve`'s `/acp`: Streamable HTTP
 * (`createHttpStream`) or WebSocket (`createWebSocketStream`), with the API
 * token, collecting every `session/update` and answering permission requests
 * as a test says.
 *
 * @module
 */

import * as acp from "@agentclientprotocol/sdk";
import { createHttpStream } from "@agentclientprotocol/sdk/experimental/http-client";
import { createWebSocketStream } from "@agentclientprotocol/sdk/experimental/ws-client";
import assert from "node:assert/strict";
import { apiFetch } from "./serve_test_helpers.ts";

/** The two transports of the ACP remote transport. */
export type AcpProfile = "http" | "websocket";

/** Both profiles, for tests that run under each. */
export const PROFILES: readonly AcpProfile[] = ["http", "websocket"];

/** How a test answers the agent's permission requests. */
export type PermissionAnswerer = (
  request: acp.RequestPermissionRequest,
) => Promise<acp.RequestPermissionResponse>;

/** Options of {@linkcode openAcpClient}. */
export interface AcpClientOptions {
  /** The runner's base URL (`http://127.0.0.1:port`). */
  url: string;
  /** The API token sent as `Authorization: Bearer …` (none: no header). */
  token?: string;
  /** Which transport. */
  profile: AcpProfile;
  /** The URL query (target keys). */
  query?: Record<string, string>;
  /** Answers permission requests (default: never answers). */
  onPermission?: PermissionAnswerer;
}

/** An open client. */
export interface AcpTestClient {
  /** Calls the agent. */
  agent: acp.ClientContext;
  /** Every `session/update` so far, in arrival order. */
  updates: acp.SessionNotification[];
  /** Permission requests so far. */
  permissions: acp.RequestPermissionRequest[];
  /** Resolves at the next update or permission request. */
  next(): Promise<void>;
  /** Closes the connection. */
  close(): void;
  /** Resolves when the connection closed. */
  closed: Promise<void>;
}

/** Deno's WebSocket with the header argument the SDK's client passes. */
class HeaderWebSocket extends WebSocket {
  constructor(
    url: string,
    protocols?: string | string[],
    options?: { headers?: Record<string, string> },
  ) {
    // @ts-ignore: Deno's WebSocket takes `{protocols, headers}`.
    super(url, { protocols, headers: options?.headers });
  }
}

/** Connects the SDK's client to `/acp`. */
export function openAcpClient(options: AcpClientOptions): AcpTestClient {
  const query = new URLSearchParams(options.query ?? {}).toString();
  const path = `/acp${query ? `?${query}` : ""}`;
  const headers: Record<string, string> = options.token
    ? { authorization: `Bearer ${options.token}` }
    : {};
  const stream = options.profile === "http"
    ? createHttpStream(`${options.url}${path}`, { headers })
    : createWebSocketStream(`${options.url.replace(/^http/, "ws")}${path}`, {
      headers,
      WebSocket: HeaderWebSocket,
    });
  const updates: acp.SessionNotification[] = [];
  const permissions: acp.RequestPermissionRequest[] = [];
  let waiters: (() => void)[] = [];
  const wake = () => {
    const current = waiters;
    waiters = [];
    current.forEach((resolve) => resolve());
  };
  const connection = acp.client({ name: "runner-test" })
    .onNotification("session/update", ({ params }) => {
      updates.push(params);
      wake();
    })
    .onRequest("session/request_permission", ({ params }) => {
      permissions.push(params);
      wake();
      return options.onPermission?.(params) ?? new Promise(() => {});
    })
    .connect(stream);
  return {
    agent: connection.agent,
    updates,
    permissions,
    next: () => new Promise((resolve) => waiters.push(resolve)),
    close: () => connection.close(),
    closed: connection.closed,
  };
}

/** `initialize` as an editor sends it. */
export function initialize(
  client: AcpTestClient,
): Promise<acp.InitializeResponse> {
  return client.agent.request("initialize", {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: {
      fs: { readTextFile: true, writeTextFile: true },
      terminal: true,
    },
  });
}

/** Opens a session from an editor's `cwd`, with `_meta` when given; returns its id. */
export async function newSession(
  client: AcpTestClient,
  options: { cwd?: string; meta?: Record<string, unknown> } = {},
): Promise<string> {
  const { sessionId } = await client.agent.request("session/new", {
    cwd: options.cwd ?? "/on/the/editor",
    mcpServers: [],
    ...(options.meta ? { _meta: options.meta } : {}),
  });
  return sessionId;
}

/** Sends `text` as a prompt on `sessionId`. */
export function promptText(
  client: AcpTestClient,
  sessionId: string,
  text: string,
): Promise<acp.PromptResponse> {
  return client.agent.request("session/prompt", {
    sessionId,
    prompt: [{ type: "text", text }],
  });
}

/**
 * Checks that `GET /v1/runs` lists one run for the session, the one the
 * prompt's `answer` names, completed; returns that run as listed.
 */
export async function assertOnlyRun(
  serveUrl: string,
  sessionId: string,
  answer: acp.PromptResponse,
): Promise<Record<string, unknown> & { config: Record<string, unknown> }> {
  const runId = (answer._meta?.runner as { run_id: string }).run_id;
  const listed = await (await apiFetch(
    `${serveUrl}/v1/runs?conversation_id=${sessionId}`,
  )).json();
  assert.deepEqual(
    listed.runs.map((run: { run_id: string }) => run.run_id),
    [runId],
  );
  assert.equal(listed.runs[0].status, "completed");
  return listed.runs[0];
}

/** The text of a session's agent message chunks (not replayed ones unless asked). */
export function agentText(
  updates: acp.SessionNotification[],
  sessionId: string,
  { replayed = false }: { replayed?: boolean } = {},
): string {
  return updates.filter((notification) =>
    notification.sessionId === sessionId &&
    isReplayed(notification) === replayed &&
    notification.update.sessionUpdate === "agent_message_chunk" &&
    notification.update.content.type === "text"
  ).map((notification) =>
    (notification.update as { content: { text: string } }).content.text
  ).join("");
}

/** Whether the runner marked an update as replayed from its store. */
export function isReplayed(notification: acp.SessionNotification): boolean {
  const runner = notification._meta?.runner as
    | { replayed?: boolean }
    | undefined;
  return runner?.replayed === true;
}
