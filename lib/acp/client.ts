/**
 * The ACP client core: one connection to one agent process, on the SDK's
 * builder API, with deadlines and stable failure codes. It knows nothing of
 * runs or events; `lib/run/engine.ts` drives it. See `docs/readiness.md`.
 *
 * @module
 */

import * as acp from "@agentclientprotocol/sdk";
import type {
  AnyMessage,
  ContentBlock,
  InitializeResponse,
  McpServer,
  NewSessionResponse,
  PromptResponse,
  RequestPermissionRequest,
  RequestPermissionResponse,
  StopReason,
} from "@agentclientprotocol/sdk";
import { createAcpStream } from "./stream.ts";
import { type ErrorCode, RunnerError } from "../errors.ts";
import { ACP_PROTOCOL_VERSION, RUNNER_VERSION } from "../version.ts";
import { type FsAccess, fsHandlers } from "./fs.ts";
import { terminalHandlers, type TerminalHost } from "./terminals.ts";
import { type SessionState, sessionStateOf } from "./session_state.ts";
import { settleWithin } from "../timing.ts";
import { type TokenCounts, tokensFromAcp } from "../events.ts";

/** A `session/update` notification as received (kinds the SDK lacks included). */
export interface RawSessionUpdate {
  /** The session it belongs to. */
  sessionId: string;
  /** The update object; `sessionUpdate` names its kind. */
  update: Record<string, unknown> & { sessionUpdate?: string };
}

/** Options for {@linkcode connectAgent}. */
export interface ConnectAgentOptions {
  /** The agent's stdin. */
  stdin: WritableStream<Uint8Array>;
  /** The agent's stdout. */
  stdout: ReadableStream<Uint8Array>;
  /** Largest inbound message, in bytes. */
  maxMessageBytes: number;
  /** Receives every `session/update`, in arrival order. */
  onUpdate: (update: RawSessionUpdate) => void;
  /**
   * Told of each answer to a request of ours as it arrives, in order with the
   * updates (before the request's caller hears of it).
   */
  onResponse?: () => void;
  /** Answers `session/request_permission`. */
  onPermission: (
    request: RequestPermissionRequest,
  ) => Promise<RequestPermissionResponse>;
  /** File-system capabilities to advertise, rooted at a directory. */
  fs?: FsAccess;
  /** Runs the agent's `terminal/*` commands; absent: `terminal` is not advertised. */
  terminals?: TerminalHost;
  /** Called for each non-JSON stdout line. */
  onNoise?: (line: string) => void;
}

/** What `session/prompt` answered. */
export interface PromptAnswer {
  /** Why the turn ended. */
  stopReason: StopReason;
  /** The turn's tokens (`PromptResponse.usage`), when the agent said. */
  usage?: TokenCounts;
}

/** A live ACP connection to one agent. */
export interface AgentConnection {
  /** `initialize` under a deadline; checks the protocol version. */
  initialize(timeoutMs: number): Promise<InitializeResponse>;
  /** `session/new`; returns the session id and its advertised choices. */
  newSession(
    params: { cwd: string; mcpServers: McpServer[] },
    signal?: AbortSignal,
  ): Promise<{ sessionId: string; state: SessionState }>;
  /** `session/load` (history is replayed as updates before it answers). */
  loadSession(
    params: { sessionId: string; cwd: string; mcpServers: McpServer[] },
    signal?: AbortSignal,
  ): Promise<SessionState>;
  /** `session/resume`. */
  resumeSession(
    params: { sessionId: string; cwd: string; mcpServers: McpServer[] },
    signal?: AbortSignal,
  ): Promise<SessionState>;
  /**
   * Sets one session config option, a legacy mode (`session/set_mode`) or a
   * legacy model (`session/set_model`); returns the config options the agent
   * answers with (undefined for the legacy calls).
   */
  configure(
    params: SessionSetting & { sessionId: string },
    signal?: AbortSignal,
  ): Promise<SessionState["configOptions"]>;
  /** `session/prompt`; resolves with the stop reason and the turn's tokens. */
  prompt(
    params: { sessionId: string; prompt: ContentBlock[] },
    signal?: AbortSignal,
  ): Promise<PromptAnswer>;
  /** Sends `session/cancel`. */
  cancel(sessionId: string): Promise<void>;
  /** `authenticate` with one of the agent's `authMethods`. */
  authenticate(methodId: string, signal?: AbortSignal): Promise<void>;
  /** `session/close` (only for agents that advertise `sessionCapabilities.close`). */
  closeSession(sessionId: string, signal?: AbortSignal): Promise<void>;
  /** The inbound failure that ended the connection, if any. */
  fatal(): RunnerError | undefined;
  /** Resolves when the connection closes. */
  readonly closed: Promise<void>;
  /** Closes the connection. */
  close(): void;
}

/** One setting for {@linkcode AgentConnection.configure}. */
export type SessionSetting =
  | { kind: "option"; configId: string; value: string | boolean }
  | { kind: "mode"; modeId: string }
  | { kind: "model"; modelId: string };

/** How long sending `session/cancel` may take before the run moves on to teardown. */
const CANCEL_WRITE_MS = 1000;

/** JSON-RPC code for "authentication required". */
export const AUTH_REQUIRED = -32000;
/** JSON-RPC code for "resource not found" (unknown session). */
export const RESOURCE_NOT_FOUND = -32002;

/** The SDK connection's agent side, with the failure that ended it. */
interface AgentLink {
  /** Sends requests and notifications to the agent. */
  agent: acp.ClientConnection["agent"];
  /** The inbound failure that ended the connection, if any. */
  fatal(): RunnerError | undefined;
}

/** Opens an ACP connection over an agent's stdio. */
export function connectAgent(options: ConnectAgentOptions): AgentConnection {
  let fatal: RunnerError | undefined;
  const stream = createAcpStream({
    output: options.stdin,
    input: options.stdout,
    maxMessageBytes: options.maxMessageBytes,
    onNoise: options.onNoise,
    onFatal: (error) => fatal ??= error,
    tap: (message) => {
      if (!("method" in message)) options.onResponse?.();
      return tapSessionUpdate(message, options.onUpdate);
    },
  });
  let app = acp.client({ name: "runner" }).onRequest(
    acp.methods.client.session.requestPermission,
    (context) => options.onPermission(context.params),
  );
  if (options.fs?.read || options.fs?.write) {
    app = fsHandlers(app, options.fs);
  }
  if (options.terminals) app = terminalHandlers(app, options.terminals);
  const connection = app.connect(stream);
  const link: AgentLink = { agent: connection.agent, fatal: () => fatal };
  return {
    initialize: (timeoutMs) =>
      initializeAgent(link, {
        timeoutMs,
        fs: options.fs,
        terminal: Boolean(options.terminals),
      }),
    ...sessionRequests(link),
    fatal: () => fatal,
    closed: connection.closed,
    close: () => connection.close(),
  };
}

/**
 * Hands a `session/update` notification to `onUpdate`; true when the message
 * was one (the SDK then does not see it, as it lacks some update kinds).
 */
function tapSessionUpdate(
  message: AnyMessage,
  onUpdate: (update: RawSessionUpdate) => void,
): boolean {
  if (!("method" in message) || message.method !== "session/update") {
    return false;
  }
  if ("id" in message && message.id !== undefined) return false;
  const params = (message as { params?: RawSessionUpdate }).params;
  if (params && typeof params === "object" && params.update) {
    onUpdate(params);
  }
  return true;
}

/**
 * Runs one request to the agent, aborted with `signal`; any failure becomes a
 * {@linkcode RunnerError} (the connection's fatal error first).
 */
async function callAgent<T>(
  link: AgentLink,
  call: {
    what: string;
    run: (signal: AbortSignal) => Promise<T>;
    signal?: AbortSignal;
  },
): Promise<T> {
  const { what, run, signal: external } = call;
  const controller = new AbortController();
  const onAbort = () => controller.abort(external?.reason);
  external?.addEventListener("abort", onAbort, { once: true });
  try {
    return await run(controller.signal);
  } catch (error) {
    const fatal = link.fatal();
    if (fatal) throw fatal;
    if (controller.signal.aborted && !(error instanceof acp.RequestError)) {
      throw new RunnerError("run.cancelled", `${what} was cancelled.`);
    }
    throw mapRequestError(what, error);
  } finally {
    external?.removeEventListener("abort", onAbort);
  }
}

function requestOptions(signal: AbortSignal) {
  return { cancellationSignal: signal, stopWaitingOnCancel: true };
}

async function initializeAgent(
  link: AgentLink,
  init: {
    timeoutMs: number;
    fs: ConnectAgentOptions["fs"];
    terminal: boolean;
  },
): Promise<InitializeResponse> {
  const { timeoutMs, fs, terminal } = init;
  const timer = AbortSignal.timeout(timeoutMs);
  let response: InitializeResponse;
  try {
    response = await callAgent(link, {
      what: "initialize",
      run: (signal) =>
        link.agent.request(acp.methods.agent.initialize, {
          protocolVersion: ACP_PROTOCOL_VERSION,
          clientCapabilities: {
            fs: {
              readTextFile: Boolean(fs?.read),
              writeTextFile: Boolean(fs?.write),
            },
            terminal,
          },
          clientInfo: { name: "runner", version: RUNNER_VERSION },
        }, requestOptions(signal)),
      signal: timer,
    });
  } catch (error) {
    if (timer.aborted && !link.fatal()) {
      throw new RunnerError(
        "acp.initialize_timeout",
        `The agent did not answer initialize within ${
          timeoutMs / 1000
        } s. Check that the command starts an ACP stdio server (many agents need an --acp flag), or raise initialize-timeout for a slow first start.`,
      );
    }
    throw error;
  }
  if (response.protocolVersion !== ACP_PROTOCOL_VERSION) {
    throw new RunnerError(
      "acp.incompatible_protocol",
      `The agent speaks ACP protocol version ${
        JSON.stringify(response.protocolVersion)
      }; this runner speaks version ${ACP_PROTOCOL_VERSION}. Use an agent release that supports protocol ${ACP_PROTOCOL_VERSION}.`,
    );
  }
  return response;
}

/** The session methods of {@linkcode AgentConnection}, over `link`. */
function sessionRequests(
  link: AgentLink,
): Pick<
  AgentConnection,
  | "newSession"
  | "loadSession"
  | "resumeSession"
  | "configure"
  | "prompt"
  | "cancel"
  | "closeSession"
  | "authenticate"
> {
  const { agent } = link;
  return {
    newSession: (params, signal) =>
      callAgent(link, {
        what: "session/new",
        run: async (s) => {
          const response: NewSessionResponse = await agent.request(
            acp.methods.agent.session.new,
            params,
            requestOptions(s),
          );
          return {
            sessionId: response.sessionId,
            state: sessionStateOf(response),
          };
        },
        signal,
      }),
    loadSession: (params, signal) =>
      restoreSession(link, { method: "load", params, signal }),
    resumeSession: (params, signal) =>
      restoreSession(link, { method: "resume", params, signal }),
    configure: (params, signal) => configureSession(link, params, signal),
    prompt: (params, signal) =>
      callAgent(link, {
        what: "session/prompt",
        run: async (s) => {
          const response: PromptResponse = await agent.request(
            acp.methods.agent.session.prompt,
            params,
            requestOptions(s),
          );
          return {
            stopReason: response.stopReason,
            // `usage` is in the SDK's unstable schema only.
            usage: tokensFromAcp((response as { usage?: unknown }).usage),
          };
        },
        signal,
      }),
    closeSession: (sessionId, signal) =>
      closeAgentSession(link, sessionId, signal),
    authenticate: async (methodId, signal) => {
      await callAgent(link, {
        what: "authenticate",
        run: (s) =>
          agent.request(
            acp.methods.agent.authenticate,
            { methodId },
            requestOptions(s),
          ),
        signal,
      });
    },
    async cancel(sessionId) {
      // An agent that stopped reading stdin would hold this write forever.
      await settleWithin(
        agent.notify(acp.methods.agent.session.cancel, { sessionId }),
        CANCEL_WRITE_MS,
      );
    },
  };
}

/** `session/load` or `session/resume`; returns the advertised choices. */
function restoreSession(
  link: AgentLink,
  call: {
    method: "load" | "resume";
    params: { sessionId: string; cwd: string; mcpServers: McpServer[] };
    signal?: AbortSignal;
  },
): Promise<SessionState> {
  const method = acp.methods.agent.session[call.method];
  return callAgent(link, {
    what: method,
    run: async (s) =>
      sessionStateOf(
        await link.agent.request(method, call.params, requestOptions(s)),
      ),
    signal: call.signal,
  });
}

/** `session/close`. */
async function closeAgentSession(
  link: AgentLink,
  sessionId: string,
  signal?: AbortSignal,
): Promise<void> {
  await callAgent(link, {
    what: "session/close",
    run: (s) =>
      link.agent.request(
        acp.methods.agent.session.close,
        { sessionId },
        requestOptions(s),
      ),
    signal,
  });
}

/** `session/set_config_option`, `session/set_mode` or `session/set_model`. */
function configureSession(
  link: AgentLink,
  params: SessionSetting & { sessionId: string },
  signal?: AbortSignal,
): Promise<SessionState["configOptions"]> {
  const { sessionId } = params;
  const [method, body]: [string, Record<string, unknown>] =
    params.kind === "option"
      ? [
        acp.methods.agent.session.setConfigOption,
        typeof params.value === "boolean"
          ? {
            sessionId,
            configId: params.configId,
            type: "boolean",
            value: params.value,
          }
          : { sessionId, configId: params.configId, value: params.value },
      ]
      : params.kind === "mode"
      ? [acp.methods.agent.session.setMode, {
        sessionId,
        modeId: params.modeId,
      }]
      : ["session/set_model", { sessionId, modelId: params.modelId }];
  return callAgent(link, {
    what: method,
    run: async (s) => {
      const response = await link.agent.request<unknown>(
        method,
        body,
        requestOptions(s),
      );
      return sessionStateOf(response).configOptions;
    },
    signal,
  });
}

/** Whether an error is the agent's "unknown session" answer. */
export function isSessionNotFound(error: unknown): boolean {
  return error instanceof RunnerError &&
    error.detail?.rpcCode === RESOURCE_NOT_FOUND;
}

function mapRequestError(what: string, error: unknown): RunnerError {
  if (error instanceof RunnerError) return error;
  if (error instanceof acp.RequestError) {
    const detail = { rpcCode: error.code, method: what };
    if (error.code === AUTH_REQUIRED) {
      return new RunnerError(
        "acp.unauthenticated",
        `The agent requires authentication (${what}: ${error.message}). Log in with the agent's own CLI on the machine where it runs, or pass its API key through env-json.`,
        { detail },
      );
    }
    const code: ErrorCode = what === "session/prompt"
      ? "acp.prompt_failed"
      : "acp.session_failed";
    return new RunnerError(
      code,
      `The agent answered ${what} with error ${error.code}: ${
        agentExplanation(error)
      }`,
      { detail },
    );
  }
  return new RunnerError(
    "acp.process_exited",
    `The agent connection closed during ${what}; check that the agent is installed and logged in.`,
    { cause: error },
  );
}

/**
 * The error's message plus the explanation agents put in `data` (an agent
 * that throws a plain error reaches us as -32603 "Internal error" with the
 * real reason in `data.details`).
 */
function agentExplanation(error: acp.RequestError): string {
  const data = error.data as Record<string, unknown> | undefined;
  const said = [data?.details, data?.message].find((value) =>
    typeof value === "string" && value.trim() && !error.message.includes(value)
  );
  return said ? `${error.message} (${said})` : error.message;
}
