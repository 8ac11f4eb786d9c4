/**
 * The daemon's outstanding MCP requests on one hub connection: each
 * `mcp.request` gets a random id, and the hub's `mcp.response` with that id,
 * a timeout or the connection's end settles it. While one is outstanding the
 * keep-alive is held: a hub busy with a tool call is not a dead hub.
 *
 * @module
 */

import { RunnerError } from "../errors.ts";
import {
  encodeDaemonFrame,
  isOversizedFrame,
  type Json,
  randomUrlSafe,
} from "../relay.ts";

/** Options of {@linkcode createMcpRequests}. */
export interface McpRequestsOptions {
  /** Sends one encoded frame; returns false when not connected. */
  send(text: string): boolean;
  /** How long to wait for an answer. */
  timeoutMs: number;
  /** Holds the keep-alive while a request is outstanding; returns the release. */
  hold?: () => () => void;
}

/** The MCP requests awaiting the hub's answer. */
export interface McpRequests {
  /**
   * Sends `payload` for `jobId`; resolves with the hub's answer (`null` for
   * notifications). `timeoutMs` overrides the table's timeout.
   */
  request(jobId: string, payload: Json, timeoutMs?: number): Promise<Json>;
  /** Settles the request `requestId` with the hub's answer (unknown ids are ignored). */
  answer(requestId: string, payload: Json): void;
  /** Rejects every outstanding request with `relay.mcp_failed` (the connection closed). */
  failAll(): void;
}

/** Makes the request table of one hub connection. */
export function createMcpRequests(options: McpRequestsOptions): McpRequests {
  const pending = new Map<string, (result: Json | RunnerError) => void>();
  return {
    request(jobId, payload, timeoutMs = options.timeoutMs) {
      const requestId = randomUrlSafe(12);
      const text = encodeDaemonFrame({
        type: "mcp.request",
        request_id: requestId,
        job_id: jobId,
        payload,
      });
      if (isOversizedFrame(text)) {
        return Promise.reject(
          new RunnerError(
            "relay.protocol_error",
            "the MCP message is larger than the relay's 1 MiB frame limit",
          ),
        );
      }
      return new Promise((resolve, reject) => {
        const release = options.hold?.() ?? (() => {});
        const timer = setTimeout(() => {
          pending.delete(requestId);
          release();
          reject(
            new RunnerError(
              "relay.mcp_failed",
              `the hub did not answer the MCP request within ${timeoutMs} ms`,
            ),
          );
        }, timeoutMs);
        pending.set(requestId, (result) => {
          clearTimeout(timer);
          release();
          if (result instanceof RunnerError) reject(result);
          else resolve(result);
        });
        if (!options.send(text)) {
          pending.get(requestId)?.(
            new RunnerError(
              "relay.mcp_failed",
              "not connected to the hub; the MCP request was not sent",
            ),
          );
          pending.delete(requestId);
        }
      });
    },
    answer(requestId, payload) {
      const settle = pending.get(requestId);
      pending.delete(requestId);
      settle?.(payload);
    },
    failAll() {
      for (const settle of pending.values()) {
        settle(
          new RunnerError(
            "relay.mcp_failed",
            "the hub connection closed before the MCP answer came",
          ),
        );
      }
      pending.clear();
    },
  };
}
