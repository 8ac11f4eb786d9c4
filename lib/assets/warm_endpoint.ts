/**
 * The assets backend of a warm agent's MCP endpoint: the endpoint (its URL
 * and token) lives as long as the agent, because the agent's session was
 * created with it, but what it answers follows the run that holds the agent
 * now — that run's grant, until that run ends or its token TTL is up. Between
 * runs the token is answered like an unknown one. See `docs/assets.md`.
 *
 * @module
 */

import type { RunAssetsSpec } from "./grant.ts";
import {
  type AssetBackend,
  createAssetBackend,
  type JsonRpcRequest,
} from "./mcp/server.ts";

/** An endpoint backend handed from run to run. */
export interface WarmBackend {
  /** What the endpoint serves. */
  backend: AssetBackend;
  /** Lets `spec`'s run answer from now on, for at most `ttlMs`. */
  hold(spec: RunAssetsSpec, ttlMs: number): void;
  /** Ends `runId`'s hold, if it still holds the endpoint. */
  letGo(runId: string): void;
}

/** Options for {@linkcode createWarmBackend}. */
export interface WarmBackendOptions {
  /** Gateway mode (tool schemas take `run_token`). */
  gateway: boolean;
  /** Deadline of one call forwarded to an upstream or callback. */
  sourceTimeoutMs?: number;
}

/** The longest delay `setTimeout` honours (about 24.8 days). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** Makes the backend of a warm agent's endpoint; nobody holds it yet. */
export function createWarmBackend(options: WarmBackendOptions): WarmBackend {
  let current: AssetBackend | undefined;
  let expiry: ReturnType<typeof setTimeout> | undefined;
  const holder = (): AssetBackend => {
    if (!current) throw new Error("no run holds this assets endpoint");
    return current;
  };
  const letGo = () => {
    clearTimeout(expiry);
    current = undefined;
  };
  return {
    backend: {
      get runId() {
        return current?.runId ?? "";
      },
      handle: (message: unknown, auth) => holder().handle(message, auth),
      handleRequest: (request: JsonRpcRequest, auth) =>
        holder().handleRequest(request, auth),
      active: () => current !== undefined,
    },
    hold(spec, ttlMs) {
      letGo();
      current = createAssetBackend(spec, {
        gateway: options.gateway,
        listGrantedTools: !options.gateway,
        sourceTimeoutMs: options.sourceTimeoutMs,
      });
      expiry = setTimeout(letGo, Math.min(ttlMs, MAX_TIMER_MS));
      Deno.unrefTimer(expiry);
    },
    letGo(runId) {
      if (current?.runId === runId) letGo();
    },
  };
}
