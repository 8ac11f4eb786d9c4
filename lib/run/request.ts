/**
 * What a caller hands the run manager: the run request, and the hooks the
 * assets layer plugs in. Kept apart from the manager so that
 * locations and assets can name these types without importing the manager.
 *
 * @module
 */

import type { McpCapabilities, McpServer } from "@agentclientprotocol/sdk";
import type { RunAssetsRequest } from "../assets/request.ts";
import type { RunConfig } from "../config.ts";
import type { RunInput } from "./prompt.ts";
import type { SessionChoices } from "./caller_floor.ts";

/** A request to start a run. */
export interface RunRequest {
  /** Made when absent. */
  runId?: string;
  /** Enables session reuse and steering. */
  conversationId?: string;
  /** The first input. */
  input: RunInput;
  /** The validated config. */
  config: RunConfig;
  /**
   * LangBot assets: `{event?, grant?, upstream? | callback? | inline?}`
   * (see `docs/assets.md`). Checked when the run starts (`config.invalid`);
   * upstream header values and the callback secret are redacted.
   */
  assets?: RunAssetsRequest;
  /**
   * Why nobody can answer this run's permission requests (e.g. the n8n
   * webhook): `permission-decision=ask` then means `permission-fallback`.
   */
  permissionAskUnavailable?: string;
  /**
   * What the operator lets callers choose of the session's model, mode and
   * options: the conversation's remembered values outside it are not asked
   * for again (`run/caller_floor.ts`). Absent: the run's values are the
   * operator's own.
   */
  sessionChoices?: SessionChoices;
  /**
   * Receives each `session/update` of the run's turns as the agent sent it,
   * secrets redacted (replayed history and updates after the terminal event
   * are not passed on). The `/acp` endpoint hands them to its client.
   */
  onSessionUpdate?: (update: Record<string, unknown>) => void;
}

/** A run's assets endpoint kept with its warm agent (`docs/runs.md`, "Warm agents"). */
export interface KeptRunAssets {
  /**
   * Hands the endpoint to a later run of the agent: from now on it answers
   * with that run's grant. Throws `config.invalid` for a bad `assets` field.
   */
  attach(context: { runId: string; request: RunRequest }): {
    /** The run-scope note for the run's first prompt. */
    promptPrefix?: string;
    /** Values to redact from the run's events and logs (the endpoint token). */
    secrets: string[];
    /** Ends the run's grant (the endpoint stays). */
    release(): void;
  };
  /** Stops the endpoint: the agent is gone. */
  stop(): void;
}

/** Hooks that wire assets into a run (the assets layer supplies them). */
export interface RunAssetsHook {
  /**
   * Prepares MCP servers and the prompt prefix; `release` runs when the run
   * ends. With `keepable` the endpoint can outlive the run (`keep`).
   */
  prepare(context: {
    runId: string;
    request: RunRequest;
    keepable?: boolean;
  }): Promise<{
    mcpServers: McpServer[];
    /** Servers chosen once the agent's `mcpCapabilities` are known. */
    sessionMcpServers?: (capabilities: McpCapabilities) => McpServer[];
    promptPrefix?: string;
    /** Values to redact from the run's events and logs (run tokens). */
    secrets?: string[];
    /**
     * The URLs of the run's own endpoints on this machine (its assets
     * endpoint): a confined agent's private network lets their loopback
     * ports through, and nothing else of the host's loopback.
     */
    endpointUrls?: string[];
    release(): void;
    /**
     * Keeps the endpoint for the run's warm agent (only when prepared
     * `keepable`); `release` then only ends this run's grant.
     */
    keep?(): KeptRunAssets;
  }>;
}
