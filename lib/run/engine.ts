/**
 * The run engine, written once: it turns a run request into ACP calls and a
 * stream of run events. It is handed a way to launch the agent (a location),
 * a stored session id, and an event sink; it knows nothing of HTTP, sockets
 * or the store. Session choice, prompt mapping, events, steering and
 * permissions live here. See `docs/runs.md`.
 *
 * @module
 */

import type { McpCapabilities, McpServer } from "@agentclientprotocol/sdk";
import { connectAgent } from "../acp/client.ts";
import type { AgentConnection } from "../acp/client.ts";
import type { RunConfig } from "../config.ts";
import { RunnerError, toRunnerError } from "../errors.ts";
import type { EventSink, RunUsage } from "../events.ts";
import { buildPrompt, type RunInput } from "./prompt.ts";
import { redactSecrets } from "../secrets.ts";
import { failureEventData } from "./failure.ts";
import { settleWithin } from "../timing.ts";
import { answerPermission } from "./permissions.ts";
import { applyUpdate, createEventEmitter, type TurnState } from "./events.ts";
import { chooseSession } from "./session.ts";

/** What a location hands the engine: the agent's byte streams and a teardown. */
export interface AgentTransport {
  /** The agent's stdin. */
  stdin: WritableStream<Uint8Array>;
  /** The agent's stdout. */
  stdout: ReadableStream<Uint8Array>;
  /** Resolves when the agent (or its carrier, e.g. ssh) exits. */
  exited: Promise<unknown>;
  /** The redacted stderr tail. */
  stderrTail(): string;
  /** Stops the agent and waits until its process group is gone. */
  teardown(): Promise<void>;
  /** MCP servers the location contributes (e.g. the daemon's proxy). */
  mcpServers?: McpServer[];
  /** More servers, chosen by the agent's `mcpCapabilities` (may throw `config.invalid`). */
  sessionMcpServers?: (capabilities: McpCapabilities) => McpServer[];
  /** Text the location prepends to the first prompt (the run-scope note). */
  promptPrefix?: string;
}

/** Everything the engine needs for one run. */
export interface RunEngineOptions {
  /** The run id. */
  runId: string;
  /** The conversation, when the run has one (enables steering). */
  conversationId?: string;
  /** The first input. */
  input: RunInput;
  /** The validated config. */
  config: RunConfig;
  /** The session id stored for this conversation, if any. */
  storedSessionId?: string;
  /** The ACP session's working directory. */
  sessionCwd: string;
  /** Starts the agent (the location). */
  launch: (signal: AbortSignal) => Promise<AgentTransport>;
  /** Receives the run's events in order. */
  emit: EventSink;
  /** MCP servers given to the session (sent again on load/resume). */
  mcpServers?: McpServer[];
  /** Text prepended to the first prompt (the run-scope note). */
  promptPrefix?: string;
  /** Values redacted from anything the engine reports. */
  secrets?: string[];
  /** Structured log lines (never secrets). */
  log?: (entry: Record<string, unknown>) => void;
}

/** How a run ended. */
export interface RunResult {
  /** Final status. */
  status: "completed" | "failed" | "cancelled";
  /** The failure code, when failed or cancelled. */
  code?: string;
  /** The ACP session used, when one was established. */
  sessionId?: string;
}

/** What happened to a follow-up offered with {@linkcode RunHandle.steer}. */
export type SteerOutcome = "queued" | "closed" | "full";

/** A running run. */
export interface RunHandle {
  /** The run id. */
  readonly runId: string;
  /** Queues a follow-up for the next turn; "closed" means start a new run. */
  steer(input: RunInput): SteerOutcome;
  /** Cancels the run (`run.cancelled`), or ends it with another code. */
  cancel(reason?: RunnerError): void;
  /** Resolves once the terminal event has been emitted. */
  readonly done: Promise<RunResult>;
}

/** Follow-ups a run holds at most. */
export const STEERING_QUEUE_LIMIT = 100;

/** How long teardown waits for an agent whose launch outlived the run. */
const LATE_LAUNCH_WAIT_MS = 10_000;

/** Starts a run; its events go to `options.emit`. */
export function startRun(options: RunEngineOptions): RunHandle {
  const { config } = options;
  const secrets = options.secrets ?? [];
  const log = options.log ?? (() => {});
  const emitter = createEventEmitter({
    runId: options.runId,
    sink: options.emit,
    onDropped: (event) =>
      log({ msg: "event after terminal event dropped", type: event.type }),
  });
  const queue: RunInput[] = [];
  let closed = false;
  const abort = new AbortController();
  let turn: TurnState | undefined;
  let replaying = false;
  let usage: RunUsage | undefined;
  let messageSequence = 0;
  let lastUpdateAt = 0;
  let sessionId: string | undefined;
  let transport: AgentTransport | undefined;
  let lateTeardown: Promise<void> | undefined;
  let connection: AgentConnection | undefined;
  const runTimer = setTimeout(() =>
    abort.abort(
      new RunnerError(
        "run.timeout",
        `The run exceeded its timeout of ${config.timeout} s. Raise timeout, or split the task.`,
      ),
    ), config.timeout * 1000);

  const emit = emitter.emit;
  const aborted = new Promise<never>((_, reject) => {
    abort.signal.addEventListener("abort", () => reject(abort.signal.reason), {
      once: true,
    });
  });
  aborted.catch(() => {});
  const untilAborted = <T>(promise: Promise<T>) =>
    Promise.race([promise, aborted]);

  function onUpdate(update: Record<string, unknown>) {
    lastUpdateAt = performance.now();
    if (replaying) return;
    if (emitter.ended) {
      log({ msg: "update after terminal event", kind: update.sessionUpdate });
      return;
    }
    applyUpdate({
      update,
      turn,
      emit,
      streaming: config.streaming,
      nextMessageSequence: () => ++messageSequence,
      onUsage: (next) => usage = { ...usage, ...next },
    });
  }

  async function startAgent(): Promise<AgentConnection> {
    const startup = AbortSignal.timeout(config.startupTimeout * 1000);
    const startupFailed = () =>
      new RunnerError(
        "acp.start_timeout",
        `The agent was not ready within startup-timeout (${config.startupTimeout} s). Raise startup-timeout for slow first starts (npx installs), or check the agent's stderr.`,
      );
    const startupAborted = new Promise<never>((_, reject) =>
      startup.addEventListener("abort", () => reject(startupFailed()), {
        once: true,
      })
    );
    startupAborted.catch(() => {});
    const signal = AbortSignal.any([abort.signal, startup]);
    const launching = options.launch(signal);
    try {
      transport = await untilAborted(Promise.race([launching, startupAborted]));
    } catch (error) {
      // Cancelled or timed out while the location was still starting the
      // agent: whatever it starts later must still be torn down.
      lateTeardown = launching.then((late) => late.teardown(), () => {});
      throw error;
    }
    const conn = connectAgent({
      stdin: transport.stdin,
      stdout: transport.stdout,
      maxMessageBytes: config.maxMessageMb * 1024 * 1024,
      onUpdate: ({ update }) => onUpdate(update),
      onPermission: (request) =>
        answerPermission({
          request,
          wanted: config.permissionDecision,
          cancelled: abort.signal.aborted,
          emit,
        }),
      fs: {
        read: config.fsRead,
        write: config.fsWrite,
        root: options.sessionCwd,
      },
      onNoise: (line) =>
        log({ msg: "agent stdout noise", line: redactSecrets(line, secrets) }),
    });
    connection = conn;
    const initialized = await untilAborted(
      Promise.race([
        conn.initialize(config.initializeTimeout * 1000),
        startupAborted,
      ]),
    );
    const choice = await untilAborted(Promise.race([
      chooseSession({
        connection: conn,
        initialize: initialized,
        config,
        storedSessionId: options.storedSessionId,
        cwd: options.sessionCwd,
        mcpServers: [
          ...(options.mcpServers ?? []),
          ...(transport.mcpServers ?? []),
          ...(transport.sessionMcpServers?.(
            initialized.agentCapabilities?.mcpCapabilities ?? {},
          ) ?? []),
        ],
        setReplaying: (value) => replaying = value,
        log,
      }),
      startupAborted,
    ]));
    sessionId = choice.sessionId;
    if (sessionId !== options.storedSessionId) {
      emit("state.updated", {
        scope: "conversation",
        key: "external.acp_session_id",
        value: sessionId,
      });
    }
    promptCapabilities = initialized.agentCapabilities?.promptCapabilities;
    return conn;
  }
  let promptCapabilities:
    | import("@agentclientprotocol/sdk").PromptCapabilities
    | undefined;

  async function runTurn(
    conn: AgentConnection,
    input: RunInput,
    followUp: boolean,
  ): Promise<{ stopReason: string; text: string }> {
    const { blocks } = buildPrompt({
      input,
      capabilities: promptCapabilities,
      limits: {
        maxAttachmentBytes: config.maxAttachmentMb * 1024 * 1024,
        maxPromptBytes: config.maxPromptMb * 1024 * 1024,
      },
      prefixText: followUp ? undefined : joinPrefix(
        options.promptPrefix,
        transport?.promptPrefix,
      ),
      followUp,
    });
    const current: TurnState = { text: "", startedTools: new Map() };
    turn = current;
    const prompting = conn.prompt({ sessionId: sessionId!, prompt: blocks });
    prompting.catch(() => {});
    let stopReason: string;
    try {
      stopReason = await untilAborted(prompting);
    } catch (error) {
      if (abort.signal.aborted) await cancelTurn(conn, prompting);
      throw error;
    }
    await quietWindow();
    turn = undefined;
    if (current.text) {
      emit("message.completed", {
        message: { role: "assistant", content: current.text },
      });
    }
    return { stopReason, text: current.text };
  }

  async function cancelTurn(
    conn: AgentConnection,
    prompting: Promise<unknown>,
  ) {
    await conn.cancel(sessionId!);
    await settleWithin(prompting, config.cancelGrace * 1000);
  }

  async function quietWindow() {
    // Stragglers: updates may follow the prompt answer. Wait until the agent
    // has been quiet for late-update-ms (at most 10 × that), unless it exits
    // or the run is cancelled.
    const quiet = config.lateUpdateMs;
    const limit = performance.now() + quiet * 10;
    const interrupted = Promise.race([
      aborted,
      transport?.exited ?? new Promise<never>(() => {}),
    ]);
    interrupted.catch(() => {});
    let stop = false;
    interrupted.then(() => stop = true, () => stop = true);
    lastUpdateAt = Math.max(lastUpdateAt, performance.now());
    while (!stop && performance.now() < limit) {
      const wait = Math.min(
        lastUpdateAt + quiet - performance.now(),
        limit - performance.now(),
      );
      if (wait <= 0) break;
      await settleWithin(interrupted, wait);
    }
  }

  async function execute(): Promise<RunResult> {
    const conn = await startAgent();
    let input: RunInput = options.input;
    let followUp = false;
    const texts: string[] = [];
    let stopReason = "end_turn";
    for (;;) {
      const result = await runTurn(conn, input, followUp);
      // A cancel that lands in the quiet window after the answer still wins.
      if (abort.signal.aborted) throw abort.signal.reason;
      stopReason = result.stopReason;
      if (result.text) texts.push(result.text);
      if (stopReason === "cancelled") break;
      const next = queue.shift();
      if (!next) break;
      log({
        msg: "steering turn",
        run_id: options.runId,
        queued: queue.length,
      });
      input = next;
      followUp = true;
    }
    closed = true;
    if (stopReason === "refusal") {
      throw new RunnerError(
        "acp.refused",
        "The agent refused to answer this prompt (stop reason: refusal). Rephrase the request.",
      );
    }
    if (stopReason === "cancelled") {
      throw new RunnerError("run.cancelled", "The agent cancelled the turn.");
    }
    if (!texts.length) {
      throw new RunnerError(
        "acp.empty_response",
        "The agent finished without any assistant text. Check the agent's login and model settings; its stderr may say more.",
      );
    }
    await shutdown();
    emit("run.completed", {
      finish_reason: stopReason,
      message: { role: "assistant", content: texts[texts.length - 1] },
    }, usage);
    return { status: "completed", sessionId };
  }

  async function shutdown() {
    clearTimeout(runTimer);
    connection?.close();
    await transport?.teardown();
    if (lateTeardown) await settleWithin(lateTeardown, LATE_LAUNCH_WAIT_MS);
  }

  function fail(error: unknown): RunResult {
    const failure = toRunnerError(
      abort.signal.aborted ? abort.signal.reason : error,
    );
    if (queue.length) {
      log({ msg: "follow-ups not processed", count: queue.length });
    }
    emit(
      "run.failed",
      failureEventData({
        failure,
        stderrTail: transport?.stderrTail(),
        unprocessed: queue,
        secrets,
      }),
    );
    const status = failure.code === "run.cancelled" ? "cancelled" : "failed";
    return { status, code: failure.code, sessionId };
  }

  const done = (async () => {
    try {
      return await execute();
    } catch (error) {
      closed = true;
      await shutdown().catch((teardownError) =>
        log({
          msg: "teardown failed",
          error: toRunnerError(teardownError).message,
        })
      );
      return fail(error);
    } finally {
      clearTimeout(runTimer);
    }
  })();

  return {
    runId: options.runId,
    steer(input) {
      if (closed || !options.conversationId) return "closed";
      if (queue.length >= STEERING_QUEUE_LIMIT) return "full";
      queue.push(input);
      return "queued";
    },
    cancel(reason) {
      if (closed && emitter.ended) return;
      abort.abort(
        reason ?? new RunnerError("run.cancelled", "The run was cancelled."),
      );
    },
    done,
  };
}

function joinPrefix(...parts: Array<string | undefined>): string | undefined {
  const present = parts.filter((part): part is string => Boolean(part));
  return present.length ? present.join("\n\n") : undefined;
}
