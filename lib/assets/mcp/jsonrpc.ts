/**
 * JSON-RPC 2.0 framing for the assets MCP surface: validating messages and
 * batches, error responses, and dispatch to a per-request handler.
 *
 * @module
 */

/** Standard JSON-RPC 2.0 error codes. */
export const JSONRPC_ERRORS = {
  parseError: -32700,
  invalidRequest: -32600,
  methodNotFound: -32601,
  invalidParams: -32602,
  internalError: -32603,
} as const;

/** A JSON-RPC id. */
export type JsonRpcId = string | number | null;

/** A structurally valid JSON-RPC request or notification (no `id`). */
export interface JsonRpcRequest {
  jsonrpc: "2.0";
  id?: JsonRpcId;
  method: string;
  params?: unknown;
}

/** A JSON-RPC error response. */
export function jsonRpcError(
  id: JsonRpcId,
  code: number,
  message: string,
  data?: unknown,
): Record<string, unknown> {
  return {
    jsonrpc: "2.0",
    id,
    error: { code, message, ...(data === undefined ? {} : { data }) },
  };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

function validId(id: unknown): id is JsonRpcId {
  return id === null || typeof id === "string" ||
    (typeof id === "number" && Number.isFinite(id));
}

/**
 * Validates a JSON-RPC message or batch and answers each request with
 * `handleRequest`; returns null when nothing needs an answer (notifications
 * only). A bad batch member gets its own error; the others are still answered.
 */
export async function dispatchJsonRpc(
  message: unknown,
  handleRequest: (request: JsonRpcRequest) => Promise<unknown | null>,
): Promise<unknown | null> {
  if (Array.isArray(message)) {
    if (message.length === 0) {
      return jsonRpcError(
        null,
        JSONRPC_ERRORS.invalidRequest,
        "Invalid Request: empty batch",
      );
    }
    const answers = await Promise.all(
      message.map((member) => dispatchOne(member, handleRequest)),
    );
    const replies = answers.filter((answer) => answer !== null);
    return replies.length > 0 ? replies : null;
  }
  return await dispatchOne(message, handleRequest);
}

async function dispatchOne(
  message: unknown,
  handleRequest: (request: JsonRpcRequest) => Promise<unknown | null>,
): Promise<unknown | null> {
  const id = isRecord(message) && validId(message.id) ? message.id : null;
  if (
    !isRecord(message) || message.jsonrpc !== "2.0" ||
    typeof message.method !== "string" ||
    ("id" in message && !validId(message.id)) ||
    (message.params !== undefined && !isRecord(message.params) &&
      !Array.isArray(message.params))
  ) {
    return jsonRpcError(id, JSONRPC_ERRORS.invalidRequest, "Invalid Request");
  }
  const request = message as unknown as JsonRpcRequest;
  const isNotification = !("id" in message);
  try {
    const answer = await handleRequest(request);
    return isNotification ? null : answer;
  } catch (error) {
    if (isNotification) return null;
    if (error instanceof JsonRpcFailure) {
      return jsonRpcError(id, error.code, error.message);
    }
    return jsonRpcError(id, JSONRPC_ERRORS.internalError, "Internal error", {
      code: "runner.internal",
    });
  }
}

/** Thrown by a request handler to answer with a JSON-RPC error. */
export class JsonRpcFailure extends Error {
  /** The JSON-RPC error code. */
  readonly code: number;
  /** Makes a failure answered as `{code, message}`. */
  constructor(code: number, message: string) {
    super(message);
    this.code = code;
  }
}
