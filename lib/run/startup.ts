/**
 * Starting a run's agent: launch it through the location, connect over ACP,
 * initialize, and choose the session, all within `startup-timeout`.
 *
 * @module
 */

import type { InitializeResponse } from "@agentclientprotocol/sdk";
import type { AgentConnection, ConnectAgentOptions } from "../acp/client.ts";
import { RunnerError } from "../errors.ts";
import { redactDeep, redactSecrets } from "../secrets.ts";
import { addUsage } from "../events.ts";
import { type RunContext, untilAborted } from "./context.ts";
import { applyUpdate } from "./events.ts";
import { decidePermission, mayWrite } from "./permission_policy.ts";
import { authenticateAgent } from "../acp/authenticate.ts";
import { chooseSession } from "./session.ts";
import { configureRunSession, followConfigUpdate } from "./session_config.ts";
import type { createRunTerminals } from "./terminals.ts";
import { toolFailureOf } from "./unanswered.ts";
import type { AgentTransport } from "./types.ts";
import { createLiveUpdateRedactor } from "./live_updates.ts";

/** Launches and connects the agent and chooses its session; returns the connection. */
export async function startAgent(run: RunContext): Promise<AgentConnection> {
  const { config } = run;
  const startup = AbortSignal.timeout(config.startupTimeout * 1000);
  const timeout = Promise.withResolvers<never>();
  const timedOut = () => timeout.reject(startupTimeoutError(run));
  startup.addEventListener("abort", timedOut, { once: true });
  const startupAborted = timeout.promise;
  startupAborted.catch(() => {});
  try {
    const transport = await launchAgent(run, startup, startupAborted);
    run.log({ msg: "agent started", level: "debug" });
    // The ACP client (the SDK and its schemas) loads while the agent boots.
    const client = await loadAcpClient();
    const conn = connectTransport(run, { transport, client });
    run.connection = conn;
    const initialized = await untilAborted(
      run,
      Promise.race([
        conn.initialize(config.initializeTimeout * 1000),
        startupAborted,
      ]),
    );
    run.log({ msg: "agent initialized", level: "debug" });
    await untilAborted(
      run,
      Promise.race([
        authenticateAgent({
          connection: conn,
          initialize: initialized,
          method: config.authMethod,
          signal: run.abort.signal,
        }),
        startupAborted,
      ]),
    );
    await openSession({ run, transport, conn, initialized, startupAborted });
    run.log({ msg: "session ready", level: "debug" });
    run.promptCapabilities = initialized.agentCapabilities?.promptCapabilities;
    run.canCloseSession = Boolean(
      initialized.agentCapabilities?.sessionCapabilities?.close,
    );
    return conn;
  } finally {
    // The timer lives on for startup-timeout; it must not keep the run (and
    // its text) alive that long.
    startup.removeEventListener("abort", timedOut);
  }
}

/**
 * Loads the ACP client (the SDK and its schemas) now, for a process that
 * idles before its first run (`runner serve`, `runner daemon`): that run then
 * does not wait for it on its way to the agent's `initialize`.
 */
export function preloadAcpClient(): void {
  import("../acp/client.ts").catch(() => {});
}

/** Gives `onSessionUpdate` what may be shown of `update` now. */
function passOn(run: RunContext, update: Record<string, unknown>) {
  const onSessionUpdate = run.options.onSessionUpdate;
  if (!onSessionUpdate) return;
  run.liveUpdates ??= createLiveUpdateRedactor(() => run.secrets);
  for (const shown of run.liveUpdates.push(update)) onSessionUpdate(shown);
}

/** Passes on the text the live updates held back: the turn has ended. */
export function releaseLiveUpdates(run: RunContext): void {
  for (const shown of run.liveUpdates?.end() ?? []) {
    run.options.onSessionUpdate?.(shown);
  }
}

/** Handles one `session/update` from the agent. */
export function handleUpdate(
  run: RunContext,
  update: Record<string, unknown>,
): void {
  if (run.replaying || run.awaitingQuiet || run.answeredAt !== undefined) {
    run.lastUpdateAt = performance.now();
  }
  if (run.replaying) {
    run.replayedUpdates++;
    return;
  }
  if (run.emitter.ended) {
    run.log({ msg: "update after terminal event", kind: update.sessionUpdate });
    return;
  }
  followConfigUpdate(run, update);
  passOn(run, update);
  applyUpdate({
    update,
    turn: run.turn,
    emit: run.emitter.emit,
    text: run.emitter.text,
    streaming: run.config.streaming,
    onUsage: (next) => run.usage = addUsage(run.usage, next),
  });
  if (
    update.status === "failed" &&
    String(update.sessionUpdate).startsWith("tool_call")
  ) {
    const id = String(update.toolCallId ?? "");
    const name = run.turn?.startedTools.get(id);
    // Redacted before the failure's text is encoded and cut, not after.
    run.failedTool = toolFailureOf(
      redactDeep(update, run.secrets),
      name === undefined ? undefined : redactSecrets(name, run.secrets),
    ) ?? run.failedTool;
  }
}

function startupTimeoutError(run: RunContext): RunnerError {
  return new RunnerError(
    "acp.start_timeout",
    `The agent was not ready within startup-timeout (${run.config.startupTimeout} s). Raise startup-timeout for slow first starts (npx installs), or check the agent's stderr.`,
  );
}

async function launchAgent(
  run: RunContext,
  startup: AbortSignal,
  startupAborted: Promise<never>,
): Promise<AgentTransport> {
  const signal = AbortSignal.any([run.abort.signal, startup]);
  const launching = run.options.launch(signal);
  try {
    run.transport = await untilAborted(
      run,
      Promise.race([launching, startupAborted]),
    );
    return run.transport;
  } catch (error) {
    // Cancelled or timed out while the location was still starting the
    // agent: whatever it starts later must still be torn down.
    run.lateTeardown = launching.then((late) => late.teardown(), () => {});
    throw error;
  }
}

/** The ACP client's parts, which load the SDK and its schemas. */
export interface AcpClient {
  /** Opens a connection over an agent's streams. */
  connectAgent: (options: ConnectAgentOptions) => AgentConnection;
  /** Makes a run's client terminals. */
  createRunTerminals: typeof createRunTerminals;
}

/**
 * Loads the ACP client; called once the agent is launching, so that the SDK
 * loads while the agent boots instead of before it is spawned.
 */
export async function loadAcpClient(): Promise<AcpClient> {
  const [{ connectAgent }, { createRunTerminals }] = await Promise.all([
    import("../acp/client.ts"),
    import("./terminals.ts"),
  ]);
  return { connectAgent, createRunTerminals };
}

/** Opens the run's ACP connection over a launched (or warm) agent's streams. */
export function connectTransport(
  run: RunContext,
  { transport, client }: { transport: AgentTransport; client: AcpClient },
): AgentConnection {
  const { config } = run;
  const launch = run.options.terminals;
  if (config.clientTerminals && launch) {
    run.terminals ??= client.createRunTerminals(run, launch);
  }
  return client.connectAgent({
    stdin: transport.stdin,
    stdout: transport.stdout,
    maxMessageBytes: config.maxMessageMb * 1024 * 1024,
    onUpdate: ({ update }) => handleUpdate(run, update),
    // While a prompt is out, an answer is its answer: later updates are late.
    onResponse: () => {
      if (run.prompting) run.answeredAt ??= performance.now();
    },
    onPermission: (request) => decidePermission(run, request),
    fs: {
      read: config.fsRead,
      write: config.fsWrite,
      root: run.options.sessionCwd,
      realRoot: run.realRoot,
      mayWrite: config.permissionRulesJson?.length
        ? (path) => mayWrite(run, path)
        : undefined,
    },
    terminals: run.terminals,
    onNoise: (line) =>
      run.log({
        msg: "agent stdout noise",
        line: noiseShown(redactSecrets(line, run.secrets)),
      }),
  });
}

/** The characters of a noise line the log keeps. */
const NOISE_LOGGED_CHARS = 200;

/**
 * A redacted noise line as the log shows it: its first
 * {@linkcode NOISE_LOGGED_CHARS} characters. Cut only after redaction, so
 * the cut cannot leave a secret's start that redaction would not know.
 */
function noiseShown(redacted: string): string {
  if (redacted.length <= NOISE_LOGGED_CHARS) return redacted;
  const before = redacted.charCodeAt(NOISE_LOGGED_CHARS - 1);
  const end = before >= 0xd800 && before <= 0xdbff
    ? NOISE_LOGGED_CHARS - 1
    : NOISE_LOGGED_CHARS;
  return `${redacted.slice(0, end)}…`;
}

interface OpenSessionOptions {
  run: RunContext;
  transport: AgentTransport;
  conn: AgentConnection;
  initialized: InitializeResponse;
  startupAborted: Promise<never>;
}

/** Resumes, loads or creates the session, and reports a new session id. */
async function openSession(
  { run, transport, conn, initialized, startupAborted }: OpenSessionOptions,
): Promise<void> {
  const { options } = run;
  const choice = await untilAborted(
    run,
    Promise.race([
      chooseSession({
        connection: conn,
        initialize: initialized,
        config: run.config,
        storedSessionId: options.storedSessionId,
        notRestored: options.sessionNotRestored,
        cwd: options.sessionCwd,
        mcpServers: [
          ...(options.mcpServers ?? []),
          ...(transport.mcpServers ?? []),
          ...(transport.sessionMcpServers?.(
            initialized.agentCapabilities?.mcpCapabilities ?? {},
          ) ?? []),
        ],
        setReplaying: (value) => run.replaying = value,
        log: run.log,
      }),
      startupAborted,
    ]),
  );
  run.sessionId = choice.sessionId;
  if (choice.reset !== undefined) {
    run.emitter.emit("session.reset", {
      stored_session_id: options.storedSessionId ?? null,
      session_id: choice.sessionId,
      reason: choice.reset,
    });
  }
  if (run.sessionId !== options.storedSessionId) {
    run.emitter.emit("state.updated", {
      scope: "conversation",
      key: "external.acp_session_id",
      value: run.sessionId,
    });
  }
  await untilAborted(
    run,
    Promise.race([
      configureRunSession(run, { connection: conn, state: choice.state }),
      startupAborted,
    ]),
  );
}
