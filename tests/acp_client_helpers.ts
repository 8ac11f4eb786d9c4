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
import { DENO_RUN_FLAGS } from "../lib/runtime_permissions.ts";
import { ROOT } from "./helpers.ts";
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
  client: Pick<AcpTestClient, "agent">,
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
  client: Pick<AcpTestClient, "agent">,
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

/** An editor's ACP client on a spawned `runner acp`'s stdio. */
export interface StdioEditor {
  /** Calls `runner acp`. */
  agent: acp.ClientContext;
  /** Closes the connection, which ends `runner acp`. */
  disconnect(): void;
  /** Every `session/update` so far. */
  updates: acp.SessionNotification[];
  /** Every permission request so far (each answered `allow_once`). */
  asked: acp.RequestPermissionRequest[];
  /** The `runner acp` process. */
  child: Deno.ChildProcess;
  /** Closes the connection and stdin, kills `runner acp` if it is still there, and waits for its exit. */
  close(): Promise<void>;
}

/**
 * Spawns `runner acp ARGS` as an editor does (stdio piped, stderr dropped)
 * and connects an ACP client to it that answers each permission request
 * `allow_once`.
 */
export function openStdioEditor(
  args: string[],
  env: Record<string, string> = {},
): StdioEditor {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", ...DENO_RUN_FLAGS, `${ROOT}main.ts`, "acp", ...args],
    env: { NO_COLOR: "1", ...env },
    stdin: "piped",
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const updates: acp.SessionNotification[] = [];
  const asked: acp.RequestPermissionRequest[] = [];
  const connection = acp.client({ name: "editor" })
    .onNotification("session/update", ({ params }) => {
      updates.push(params);
    })
    .onRequest("session/request_permission", ({ params }) => {
      asked.push(params);
      return Promise.resolve({
        outcome: { outcome: "selected" as const, optionId: "allow_once" },
      });
    })
    .connect(acp.ndJsonStream(child.stdin, child.stdout));
  const close = async () => {
    connection.close();
    await child.stdin.close().catch(() => {});
    try {
      child.kill();
    } catch { /* gone */ }
    await child.status;
  };
  return {
    agent: connection.agent,
    disconnect: () => connection.close(),
    updates,
    asked,
    child,
    close,
  };
}
