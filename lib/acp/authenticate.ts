/**
 * `auth-method`: after `initialize`, the runner calls `authenticate` with
 * the configured method (one the agent lists in `authMethods`); the
 * credentials are the agent's own business, from its environment. See
 * `docs/readiness.md`, "Authentication".
 *
 * @module
 */

import type { InitializeResponse } from "@agentclientprotocol/sdk";
import type { AgentConnection } from "./client.ts";
import { RunnerError } from "../errors.ts";

/** Options for {@linkcode authenticateAgent}. */
export interface AuthenticateOptions {
  /** The initialized connection. */
  connection: AgentConnection;
  /** Its `initialize` answer. */
  initialize: InitializeResponse;
  /** The `auth-method` (undefined: nothing to do). */
  method?: string;
  /** Aborts the call. */
  signal?: AbortSignal;
}

/**
 * Authenticates with `method` when one is configured.
 *
 * @throws {RunnerError} `acp.unauthenticated` for a method the agent does not
 * list, or when the agent refuses it.
 */
export async function authenticateAgent(
  options: AuthenticateOptions,
): Promise<void> {
  const { method } = options;
  if (!method) return;
  const listed = (options.initialize.authMethods ?? []).map((m) => m.id);
  if (!listed.includes(method)) {
    throw new RunnerError(
      "acp.unauthenticated",
      `auth-method: the agent lists no method "${method}" (it lists: ${
        listed.join(", ") || "none"
      }). Set auth-method to one of them (runner probe shows them), or leave it unset.`,
      { detail: { key: "auth-method", valid: listed } },
    );
  }
  try {
    await options.connection.authenticate(method, options.signal);
  } catch (error) {
    if (!(error instanceof RunnerError) || error.code === "run.cancelled") {
      throw error;
    }
    throw new RunnerError(
      "acp.unauthenticated",
      `The agent refused authenticate with "${method}" (${error.message}). Check the credentials the method needs in env-json, or log in with the agent's own CLI.`,
      { detail: { key: "auth-method" } },
    );
  }
}
