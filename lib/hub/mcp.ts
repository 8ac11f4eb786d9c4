/**
 * The hub's answers to `mcp.request`: the caller's handler, or by default a
 * JSON-RPC error "no assets for this run" (`null` for notifications), and
 * "Run tools revoked" once the job is cancelling or done. Used by `relay_hub.ts`.
 *
 * @module
 */

import type { HubCore, JobSession } from "./jobs.ts";
import type { Json, JsonObject, McpRequestFrame } from "../relay.ts";

/** The job an MCP request belongs to. */
export interface McpJobContext {
  /** The hub's job id. */
  jobId: string;
  /** The run id. */
  runId: string;
  /** The daemon running it. */
  daemonId: string;
}

/** Answers one MCP message (or batch); `null` for notifications. */
export type McpHandler = (
  job: McpJobContext,
  payload: Json,
) => Promise<unknown | null>;

function jsonRpcError(id: Json, code: number, message: string): JsonObject {
  return { jsonrpc: "2.0", id, error: { code, message } };
}

function noAssetsAnswer(payload: Json): Json {
  const answer = (message: Json): Json => {
    if (
      typeof message !== "object" || message === null || Array.isArray(message)
    ) {
      return jsonRpcError(null, -32600, "Invalid Request");
    }
    if (!("method" in message) || !("id" in message)) return null;
    return jsonRpcError(message.id, -32000, "no assets for this run");
  };
  if (!Array.isArray(payload)) return answer(payload);
  const answers = payload.map(answer).filter((item) => item !== null);
  return answers.length ? answers : null;
}

/** Answers one `mcp.request` of `session` with an `mcp.response` (never leaves it unanswered). */
export async function answerMcp(
  core: HubCore,
  session: JobSession,
  frame: McpRequestFrame,
  handler: McpHandler | undefined,
): Promise<void> {
  let payload: Json;
  if (session.cancelling || session.done) {
    payload = jsonRpcError(null, -32000, "Run tools revoked");
  } else if (!handler) {
    payload = noAssetsAnswer(frame.payload);
  } else {
    try {
      const context = {
        jobId: session.jobId,
        runId: session.runId,
        daemonId: session.daemonId,
      };
      payload = ((await handler(context, frame.payload)) ?? null) as Json;
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      payload = jsonRpcError(null, -32000, message);
    }
  }
  core.send(session.owner, {
    type: "mcp.response",
    request_id: frame.request_id,
    job_id: session.jobId,
    payload,
  });
}
