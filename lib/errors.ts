/**
 * The failure catalogue: every failure the runner reports carries one of these
 * stable codes, a message that tells the user what to do, and `retryable`.
 * `docs/errors.md` lists the same codes (a test keeps them in step).
 *
 * @module
 */

/** What the catalogue knows about one failure code. */
export interface ErrorCodeInfo {
  /** Whether trying the same thing again may succeed. */
  retryable: boolean;
  /** One sentence: what went wrong. */
  meaning: string;
}

/** Every stable failure code, with its meaning and retryability. */
export const ERROR_CODES = {
  "config.invalid": {
    retryable: false,
    meaning: "A config key or value is invalid; nothing was started.",
  },
  "provider.unknown": {
    retryable: false,
    meaning: "The provider name is neither a preset nor `custom`.",
  },
  "provider.not_supported": {
    retryable: false,
    meaning:
      "The provider is a known ACP agent that is deliberately not a preset.",
  },
  "registry.unreachable": {
    retryable: true,
    meaning:
      "The ACP agent registry could not be read (network, HTTP status or not JSON) and no cached copy is kept.",
  },
  "agent.no_distribution": {
    retryable: false,
    meaning:
      "The registry agent has no distribution this location can run (no binary for this platform and no package, or only a binary for a PowerShell remote-ssh run).",
  },
  "agent.version_unavailable": {
    retryable: false,
    meaning:
      "The registry agent's wanted version is neither installed nor the registry's current one.",
  },
  "agent.download_failed": {
    retryable: true,
    meaning: "The agent's archive could not be downloaded.",
  },
  "agent.checksum_mismatch": {
    retryable: false,
    meaning:
      "The downloaded archive's sha256 differs from the one given, or from the one installed before under the same id and version.",
  },
  "agent.archive_refused": {
    retryable: false,
    meaning:
      "The agent's archive is unreadable, unsupported, too large or hostile (a path outside its directory, a link out, a device file); nothing was installed.",
  },
  "acp.missing_binary": {
    retryable: false,
    meaning: "The agent command was not found.",
  },
  "acp.spawn_error": {
    retryable: false,
    meaning: "The agent process could not be started.",
  },
  "sandbox.unavailable": {
    retryable: false,
    meaning:
      "The run asked for `sandbox=confined`, but this machine cannot confine agents (no bubblewrap, user namespaces not allowed, or, for `sandbox-network=full`, no pasta or iproute2's `ip`); the agent was not started.",
  },
  "acp.start_timeout": {
    retryable: true,
    meaning: "The agent process did not start within `startup-timeout`.",
  },
  "acp.initialize_timeout": {
    retryable: true,
    meaning:
      "The agent did not answer `initialize` within `initialize-timeout`.",
  },
  "acp.incompatible_protocol": {
    retryable: false,
    meaning: "The agent speaks an ACP protocol version the runner does not.",
  },
  "acp.unauthenticated": {
    retryable: false,
    meaning: "The agent requires the user to log in first.",
  },
  "acp.session_missing": {
    retryable: false,
    meaning:
      "`create-session-if-missing` is false and there is no session to continue: none is stored, or the agent cannot restore the stored one.",
  },
  "acp.session_failed": {
    retryable: true,
    meaning: "The agent refused to create, load or resume a session.",
  },
  "acp.config_unavailable": {
    retryable: false,
    meaning:
      "A wanted `model`, `mode` or `session-config-json` value (or option) is not one the agent offers; nothing was prompted.",
  },
  "acp.config_failed": {
    retryable: false,
    meaning:
      "The agent refused to set a session config option, mode or model it offers; nothing was prompted.",
  },
  "acp.prompt_failed": {
    retryable: true,
    meaning: "The agent answered `session/prompt` with an error.",
  },
  "acp.process_exited": {
    retryable: true,
    meaning: "The agent process exited before the run finished.",
  },
  "acp.message_too_large": {
    retryable: false,
    meaning: "The agent sent a message larger than `max-message-mb`.",
  },
  "acp.empty_response": {
    retryable: true,
    meaning: "The agent finished the turn without any assistant text.",
  },
  "acp.refused": {
    retryable: false,
    meaning: "The agent ended the turn with stop reason `refusal`.",
  },
  "run.timeout": {
    retryable: true,
    meaning: "The run took longer than `timeout`.",
  },
  "run.cancelled": {
    retryable: false,
    meaning: "The run was cancelled.",
  },
  "run.agent_cancelled": {
    retryable: false,
    meaning:
      "The agent ended the turn with stop reason `cancelled` without being asked to, and no permission request was refused.",
  },
  "run.permission_rejected": {
    retryable: false,
    meaning:
      "The agent ended the turn without an answer (any stop reason), or as `cancelled`, after a permission request was refused: rejected by policy, a person or the timeout's fallback, or answered `cancelled`.",
  },
  "run.tool_failed": {
    retryable: false,
    meaning:
      "The agent ended the turn without any assistant text after a tool call ended with status `failed`.",
  },
  "run.steering_queue_full": {
    retryable: true,
    meaning: "A run already holds 100 queued follow-ups.",
  },
  "prompt.attachment_too_large": {
    retryable: false,
    meaning: "An attachment, or the whole prompt, exceeds its size limit.",
  },
  "prompt.attachment_invalid": {
    retryable: false,
    meaning: "An attachment could not be decoded.",
  },
  "runner.restarted": {
    retryable: true,
    meaning: "The runner stopped while the run was active.",
  },
  "runner.replica_lost": {
    retryable: true,
    meaning:
      "The fleet replica that ran the run stopped renewing its lease (it died or lost the database).",
  },
  "runner.lease_lost": {
    retryable: true,
    meaning:
      "This fleet replica's lease lapsed (it was paused or cut off from the database), so it may not start or take work until it joins again.",
  },
  "runner.replica_id_taken": {
    retryable: false,
    meaning: "Another live runner process holds this fleet replica id.",
  },
  "runner.replica_unreachable": {
    retryable: true,
    meaning:
      "The fleet replica that owns the conversation, run or daemon could not be reached.",
  },
  "runner.shutting_down": {
    retryable: true,
    meaning: "The runner is shutting down and ended the run.",
  },
  "runner.internal": {
    retryable: true,
    meaning: "An unexpected internal error.",
  },
  "store.unavailable": {
    retryable: true,
    meaning:
      "The run store (the SQLite file in the data directory, or the fleet's PostgreSQL database) could not be opened or written.",
  },
  "store.schema_too_new": {
    retryable: false,
    meaning: "The run store was written by a newer runner version.",
  },
  "assets.unauthorized": {
    retryable: false,
    meaning:
      "An assets MCP request carried no run token, or an unknown, expired or revoked one.",
  },
  "assets.forbidden": {
    retryable: false,
    meaning:
      "The run's grant does not allow this asset (history, knowledge base or tool).",
  },
  "assets.invalid_arguments": {
    retryable: false,
    meaning: "An assets tool was called with arguments its schema rejects.",
  },
  "assets.no_source": {
    retryable: false,
    meaning: "The run has no asset source that can answer this tool.",
  },
  "assets.source_failed": {
    retryable: true,
    meaning:
      "The run's asset source (upstream MCP, callback or inline data) failed to answer.",
  },
  "assets.request_too_large": {
    retryable: false,
    meaning: "An assets MCP request body exceeded the size limit.",
  },
  "assets.listen_failed": {
    retryable: false,
    meaning:
      "The run's assets MCP server (ephemeral bridge or gateway) could not listen on its address.",
  },
  "assets.tunnel_refused": {
    retryable: false,
    meaning:
      "The SSH server refused the `ssh -R` tunnel that brings the run's LangBot assets to a remote-ssh agent.",
  },
  "agent_runtime.daemon_offline": {
    retryable: true,
    meaning:
      "The selected daemon did not connect within `daemon-connect-timeout`.",
  },
  "agent_runtime.daemon_disconnected": {
    retryable: false,
    meaning:
      "The daemon's connection dropped (or it did not acknowledge a cancel) during a job; the daemon ID is fenced.",
  },
  "agent_runtime.daemon_fenced": {
    retryable: false,
    meaning:
      "The daemon ID is fenced because an earlier job's cleanup was never confirmed.",
  },
  "agent_runtime.daemon_busy": {
    retryable: true,
    meaning: "The hub already runs 128 daemon jobs.",
  },
  "agent_runtime.daemon_cancelled": {
    retryable: false,
    meaning: "The hub cancelled the daemon job and the daemon cleaned it up.",
  },
  "agent_runtime.daemon_unexpected": {
    retryable: false,
    meaning: "The daemon's job failed with an unexpected error.",
  },
  "agent_runtime.daemon_cleanup_failed": {
    retryable: false,
    meaning:
      "A daemon job's cleanup was not confirmed; the daemon stopped and refuses to reconnect.",
  },
  "http.bad_request": {
    retryable: false,
    meaning:
      "The HTTP request is malformed (not JSON, or a field has the wrong type).",
  },
  "http.unauthorized": {
    retryable: false,
    meaning: "The request carried no valid API token (or webhook credentials).",
  },
  "http.forbidden": {
    retryable: false,
    meaning: "The caller asked for a run setting the operator did not allow.",
  },
  "http.not_found": {
    retryable: false,
    meaning: "No such route, run or conversation.",
  },
  "http.conflict": {
    retryable: false,
    meaning:
      "The run or conversation is not in a state that allows this request.",
  },
  "http.too_many_runs": {
    retryable: true,
    meaning: "The server already runs `--max-concurrent-runs` runs.",
  },
  "http.body_too_large": {
    retryable: false,
    meaning: "The request body exceeds `--max-body-mb`.",
  },
  "http.host_not_allowed": {
    retryable: false,
    meaning:
      "The request's `Host` is not an IP address, localhost, the listen name or an `--allowed-hosts` name (DNS rebinding guard).",
  },
  "http.origin_not_allowed": {
    retryable: false,
    meaning:
      "A browser page of another origin sent the request and `--allowed-origins` does not list it.",
  },
  "http.unsupported_media_type": {
    retryable: false,
    meaning: "A request body was not sent as `application/json`.",
  },
  "http.too_many_connections": {
    retryable: true,
    meaning:
      "The server holds `--max-connections` connections and all are busy, or yours had not sent its request head when a new one needed its place.",
  },
  "http.request_timeout": {
    retryable: true,
    meaning:
      "The request's headers or body did not arrive within `--header-timeout` / `--request-timeout`.",
  },
  "http.conversation_busy": {
    retryable: true,
    meaning:
      "The conversation has a run going: the webhook's wait for the previous run ran out, or an `/acp` prompt came while another replica runs a turn of it.",
  },
  "relay.protocol_error": {
    retryable: false,
    meaning:
      "A coding-relay-v1 frame was malformed, unknown or obsolete (hub and daemon versions differ).",
  },
  "relay.mcp_failed": {
    retryable: true,
    meaning:
      "An MCP request from the daemon got no answer from the hub (timeout or disconnect).",
  },
} as const satisfies Record<string, ErrorCodeInfo>;

/** A stable failure code from {@linkcode ERROR_CODES}. */
export type ErrorCode = keyof typeof ERROR_CODES;

/** Options for {@linkcode RunnerError}. */
export interface RunnerErrorOptions {
  /** Overrides the catalogue's retryability for this instance. */
  retryable?: boolean;
  /** The underlying error, kept for logs (never shown verbatim to users). */
  cause?: unknown;
  /** Extra structured detail safe to show (no secrets). */
  detail?: Record<string, unknown>;
}

/** An error with a stable code, a user-facing message and retryability. */
export class RunnerError extends Error {
  /** The stable failure code. */
  readonly code: ErrorCode;
  /** Whether trying again may succeed. */
  readonly retryable: boolean;
  /** Extra structured detail safe to show. */
  readonly detail?: Record<string, unknown>;

  /** Makes an error with `code` and a message telling the user what to do. */
  constructor(
    code: ErrorCode,
    message: string,
    options: RunnerErrorOptions = {},
  ) {
    super(message, { cause: options.cause });
    this.name = "RunnerError";
    this.code = code;
    this.retryable = options.retryable ?? ERROR_CODES[code].retryable;
    this.detail = options.detail;
  }
}

/** Wraps any thrown value as a {@linkcode RunnerError} (unknown errors become `runner.internal`). */
export function toRunnerError(error: unknown): RunnerError {
  if (error instanceof RunnerError) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new RunnerError("runner.internal", `Internal error: ${message}`, {
    cause: error,
  });
}
