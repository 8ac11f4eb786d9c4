/**
 * The `coding-relay-v1` codec: frame types, the two sides' JSON encodings,
 * frame parsing and validation, the handshake checks with their exact refusal
 * reasons, the protocol constants and marker file names. Fitting run events
 * into frames lives in `relay/event_fit.ts`. See `docs/relay.md`.
 *
 * @module
 */

import { createHash } from "node:crypto";
import { RunnerError } from "./errors.ts";
import { pythonJsonDumps } from "./relay/json.ts";

/** The protocol string both sides send and check. */
export const RELAY_PROTOCOL = "coding-relay-v1";
/** WebSocket close code for every handshake refusal (policy violation). */
export const CLOSE_POLICY = 1008;
/**
 * Close code the daemon uses when a job's cleanup was not confirmed. The
 * Python daemon sends 1011, which a WebSocket client API may not send; 4011
 * mirrors it in the application range.
 */
export const CLOSE_CLEANUP_UNCONFIRMED = 4011;
/** Close code for a frame over {@linkcode MAX_FRAME_BYTES} (message too big). */
export const CLOSE_TOO_BIG = 1009;
/** Close code the daemon uses for a protocol error such as `run.cleanup` (1002 mirrored, as above). */
export const CLOSE_PROTOCOL_ERROR = 4002;
/** Close code the daemon uses when the hub stopped answering (keep-alive timeout). */
export const CLOSE_KEEPALIVE_TIMEOUT = 4000;
/** Most daemons a hub keeps (connected plus fenced). */
export const MAX_DAEMONS = 128;
/** Most jobs a hub runs at once. */
export const MAX_JOBS = 128;
/** Longest daemon id, in Unicode code points after trimming. */
export const MAX_DAEMON_ID_LENGTH = 128;
/** How long the hub waits for `daemon.hello`. */
export const HELLO_TIMEOUT_MS = 10_000;
/** How long the hub waits for `run.finished` after `run.cancel`. */
export const CANCEL_TIMEOUT_MS = 10_000;
/** Largest daemon→hub frame, in UTF-8 bytes (the Python hub's websockets limit). */
export const MAX_FRAME_BYTES = 1024 * 1024;
/** Default MCP request timeout on the daemon side. */
export const MCP_REQUEST_TIMEOUT_MS = 60_000;
/** Default daemon reconnect delay (base of the backoff). */
export const RECONNECT_DELAY_MS = 5_000;
/** How often a connected daemon sends `daemon.ping`. */
export const PING_INTERVAL_MS = 20_000;
/**
 * How long the daemon waits for any hub frame after a ping before it gives
 * the connection up. Generous, so that a hub that is merely slow (a busy event
 * loop, a slow disk) is not cut off; the clock does not run while an MCP
 * request to the hub is outstanding (the Python hub answers no ping then).
 */
export const PING_TIMEOUT_MS = 60_000;

/** The exact close reasons of the Python hub (and ours). */
export const REFUSAL_REASONS = {
  helloRequired: "daemon.hello required",
  daemonIdRequired: "daemon_id required (max 128 characters)",
  invalidToken: "invalid token",
  upgradeProtocol:
    "upgrade daemon.py and pkg from matching plugin: coding-relay-v1 required",
  connectedOrFenced:
    "daemon ID connected or fenced; verify cleanup before reuse",
  cleanupUnconfirmed: "cleanup unconfirmed; daemon halted",
  obsolete: "obsolete relay: upgrade hub and daemon together",
  frameTooLarge: "frame exceeds 1 MiB",
  hubShuttingDown: "hub shutting down",
  keepaliveTimeout: "keepalive ping timeout",
} as const;

/** Any JSON value. */
export type Json = null | boolean | number | string | Json[] | {
  [key: string]: Json;
};
/** A JSON object. */
export type JsonObject = { [key: string]: Json };

/** daemon → hub: the first frame. */
export interface DaemonHelloFrame {
  type: "daemon.hello";
  daemon_id: string;
  protocol: string;
  token: string;
  metadata: JsonObject;
}
/** hub → daemon: the handshake answer. */
export interface DaemonReadyFrame {
  type: "daemon.ready";
  daemon_id: string;
  protocol: string;
  /**
   * Optional capabilities both ends support; our hub sends it only to a
   * daemon that announced `metadata.capabilities` (Python peers never see it).
   */
  capabilities?: string[];
}
/** hub → daemon: start a job. */
export interface RunStartFrame {
  type: "run.start";
  job_id: string;
  payload: JsonObject;
}
/** daemon → hub: one run event of a job. */
export interface RunEventFrame {
  type: "run.event";
  job_id: string;
  event: JsonObject;
  /** The runner's details of the event (`relay/wire_events.ts`); Python hubs ignore them. */
  runner?: JsonObject;
}
/**
 * daemon → hub: one live ACP `session/update` of a job's agent, secrets
 * redacted (`session.update` capability; only when `run.start` asked with
 * `session_updates`). Not a run event: nothing of it is stored.
 */
export interface RunUpdateFrame {
  type: "run.update";
  job_id: string;
  update: JsonObject;
}
/** daemon → hub: an MCP message from the job's agent. */
export interface McpRequestFrame {
  type: "mcp.request";
  request_id: string;
  job_id: string;
  payload: Json;
}
/** hub → daemon: the answer to an `mcp.request` (`null` for notifications). */
export interface McpResponseFrame {
  type: "mcp.response";
  request_id: string;
  job_id: string;
  payload: Json;
}
/** hub → daemon: a person's answer to a job's permission request (`permission.ask`). */
export interface RunPermissionFrame {
  type: "run.permission";
  job_id: string;
  request_id: string;
  answer: JsonObject;
}
/** hub → daemon: cancel a job. */
export interface RunCancelFrame {
  type: "run.cancel";
  job_id: string;
}
/** daemon → hub: the job is over and cleaned up. */
export interface RunFinishedFrame {
  type: "run.finished";
  job_id: string;
}
/** daemon → hub: keepalive. */
export interface DaemonPingFrame {
  type: "daemon.ping";
}
/** hub → daemon: keepalive answer. */
export interface DaemonPongFrame {
  type: "daemon.pong";
}

/** Frames the hub sends. */
export type HubFrame =
  | DaemonReadyFrame
  | RunStartFrame
  | McpResponseFrame
  | RunCancelFrame
  | RunPermissionFrame
  | DaemonPongFrame;
/** Frames the daemon sends. */
export type DaemonFrame =
  | DaemonHelloFrame
  | RunEventFrame
  | RunUpdateFrame
  | McpRequestFrame
  | RunFinishedFrame
  | DaemonPingFrame;
/** Any valid frame. */
export type RelayFrame = HubFrame | DaemonFrame;

/** Why a frame was rejected (in the error's `detail.reason`). */
export type ProtocolErrorReason =
  | "not_json"
  | "not_object"
  | "unknown_type"
  | "invalid_field"
  | "obsolete";

/** Makes a `relay.protocol_error` with a machine-readable reason. */
export function protocolError(
  reason: ProtocolErrorReason,
  message: string,
): RunnerError {
  return new RunnerError("relay.protocol_error", message, {
    detail: { reason },
  });
}

/** Encodes a hub frame exactly as the Python hub does (default separators). */
export function encodeHubFrame(frame: HubFrame): string {
  return pythonJsonDumps(frame);
}

/** Encodes a daemon frame exactly as the Python daemon does (compact). */
export function encodeDaemonFrame(frame: DaemonFrame): string {
  return JSON.stringify(frame);
}

/** Whether `text` is over the daemon→hub frame limit. */
export function isOversizedFrame(text: string): boolean {
  if (text.length > MAX_FRAME_BYTES) return true;
  if (text.length * 3 <= MAX_FRAME_BYTES) return false;
  return new TextEncoder().encode(text).length > MAX_FRAME_BYTES;
}

function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function requireString(
  raw: JsonObject,
  key: string,
  allowEmpty = false,
): RunnerError | undefined {
  const value = raw[key];
  if (typeof value !== "string" || (!allowEmpty && value === "")) {
    return protocolError(
      "invalid_field",
      `${raw.type} frame needs a string "${key}"`,
    );
  }
}

/**
 * The optional capability of interactive approvals: the daemon announces it
 * in `daemon.hello` metadata (`capabilities`), our hub confirms it in
 * `daemon.ready`, and then carries `run.permission` answers to the job.
 */
export const PERMISSION_ASK_CAPABILITY = "permission.ask";

/**
 * The optional capability of live agent updates: a daemon that has it sends
 * a job's ACP `session/update`s as `run.update` frames when the `run.start`
 * config asks (`session_updates: true`), for a hub whose caller is an ACP
 * client (`/acp`).
 */
export const SESSION_UPDATE_CAPABILITY = "session.update";

const JOB_FRAMES = new Set([
  "run.permission",
  "run.start",
  "run.event",
  "run.update",
  "mcp.request",
  "mcp.response",
  "run.cancel",
  "run.finished",
]);

/**
 * Parses and validates one text frame. Returns the typed frame, or a
 * `relay.protocol_error` (`detail.reason` tells why; `run.cleanup` is `obsolete`).
 */
export function parseFrame(text: string): RelayFrame | RunnerError {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return protocolError("not_json", "relay frame is not JSON");
  }
  if (!isObject(raw) || typeof raw.type !== "string") {
    return protocolError(
      "not_object",
      "relay frame must be a JSON object with a string type",
    );
  }
  const type = raw.type;
  if (type === "run.cleanup") {
    return protocolError(
      "obsolete",
      `received obsolete frame run.cleanup: ${REFUSAL_REASONS.obsolete}`,
    );
  }
  if (type === "daemon.ping" || type === "daemon.pong") {
    return { type } as RelayFrame;
  }
  if (type === "daemon.hello" || type === "daemon.ready") {
    const bad = requireString(raw, "daemon_id") ??
      requireString(raw, "protocol");
    if (bad) return bad;
    if (type === "daemon.hello") {
      if (raw.token !== undefined && typeof raw.token !== "string") {
        return protocolError(
          "invalid_field",
          "daemon.hello token must be a string",
        );
      }
      if (raw.metadata !== undefined && !isObject(raw.metadata)) {
        return protocolError(
          "invalid_field",
          "daemon.hello metadata must be an object",
        );
      }
    }
    return raw as unknown as RelayFrame;
  }
  if (!JOB_FRAMES.has(type)) {
    return protocolError("unknown_type", `unknown relay frame type ${type}`);
  }
  return checkJobFrame(type, raw) ?? raw as unknown as RelayFrame;
}

/** Why a job frame's fields are wrong; undefined when they are right. */
function checkJobFrame(
  type: string,
  raw: JsonObject,
): RunnerError | undefined {
  const bad = requireString(raw, "job_id");
  if (bad) return bad;
  if (type === "run.start" && !isObject(raw.payload)) {
    return protocolError(
      "invalid_field",
      "run.start payload must be an object",
    );
  }
  if (type === "run.permission") {
    const badId = requireString(raw, "request_id");
    if (badId) return badId;
    if (!isObject(raw.answer)) {
      return protocolError(
        "invalid_field",
        "run.permission needs an answer object",
      );
    }
  }
  if (type === "run.event" && !isObject(raw.event)) {
    return protocolError("invalid_field", "run.event event must be an object");
  }
  if (type === "run.update" && !isObject(raw.update)) {
    return protocolError(
      "invalid_field",
      "run.update update must be an object",
    );
  }
  if (type === "run.event" && "runner" in raw && !isObject(raw.runner)) {
    delete raw.runner; // details are optional: malformed ones are ignored
  }
  if (type === "mcp.request" || type === "mcp.response") {
    const badId = requireString(raw, "request_id");
    if (badId) return badId;
    if (!("payload" in raw)) {
      return protocolError("invalid_field", `${type} needs a payload`);
    }
  }
  return undefined;
}

/** The outcome of the hub's handshake checks on a first frame. */
export type HelloCheck =
  | { ok: true; daemonId: string; metadata: JsonObject }
  | { ok: false; reason: string };

/**
 * Runs the hub's hello checks in the Python order (type, daemon id, token,
 * protocol) and returns the accepted id or the exact refusal reason.
 * `tokenMatches` compares in constant time; it is not called without a hub token.
 */
export function checkHello(
  text: string,
  options: {
    hasToken: boolean;
    tokenMatches: (given: string, daemonId: string) => boolean;
  },
): HelloCheck {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return { ok: false, reason: REFUSAL_REASONS.helloRequired };
  }
  if (!isObject(raw) || raw.type !== "daemon.hello") {
    return { ok: false, reason: REFUSAL_REASONS.helloRequired };
  }
  const rawId = raw.daemon_id;
  const daemonId = (rawId === null || rawId === undefined || rawId === false ||
      rawId === "" || rawId === 0)
    ? ""
    : (typeof rawId === "string" ? rawId : JSON.stringify(rawId)).trim();
  if (daemonId === "" || [...daemonId].length > MAX_DAEMON_ID_LENGTH) {
    return { ok: false, reason: REFUSAL_REASONS.daemonIdRequired };
  }
  if (options.hasToken) {
    const given = typeof raw.token === "string" ? raw.token : "";
    if (!options.tokenMatches(given, daemonId)) {
      return { ok: false, reason: REFUSAL_REASONS.invalidToken };
    }
  }
  if (raw.protocol !== RELAY_PROTOCOL) {
    return { ok: false, reason: REFUSAL_REASONS.upgradeProtocol };
  }
  return {
    ok: true,
    daemonId,
    metadata: isObject(raw.metadata) ? raw.metadata : {},
  };
}

/** The `.pending` marker file name for a daemon id: hex SHA-256 of the id. */
export function markerFileName(daemonId: string): string {
  return createHash("sha256").update(daemonId, "utf8").digest("hex") +
    ".pending";
}

/** A random URL-safe token of `bytes` random bytes (Python `token_urlsafe`). */
export function randomUrlSafe(bytes: number): string {
  const raw = crypto.getRandomValues(new Uint8Array(bytes));
  let binary = "";
  for (const byte of raw) binary += String.fromCharCode(byte);
  return btoa(binary).replaceAll("+", "-").replaceAll("/", "_").replace(
    /=+$/,
    "",
  );
}
