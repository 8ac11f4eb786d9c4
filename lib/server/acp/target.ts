/**
 * What an `/acp` client's conversation runs: the operator's run defaults,
 * narrowed by the connection's URL query and a session's `_meta` (the same
 * keys, under the same floors, as `POST /v1/runs`'s `config`:
 * `server/policy.ts` and `run/caller_floor.ts` decide both), and what the
 * client is told of the agent behind it. See `docs/acp-endpoint.md`.
 *
 * @module
 */

import type {
  AgentCapabilities,
  AuthMethod,
  Implementation,
  InitializeResponse,
} from "@agentclientprotocol/sdk";
import type { RunConfig } from "../../config.ts";
import { RunnerError } from "../../errors.ts";
import { RUNNER_VERSION } from "../../version.ts";
import { resolveCallerConfig } from "../policy.ts";
import type { ServeConfig } from "../config/serve_config.ts";

/** The `_meta` key under which a client names run-config keys (`{"runner": {"config": {…}}}`). */
export const ACP_META_KEY = "runner";

/** Run-config keys a caller sent, kebab-case or snake_case, values as sent. */
export type CallerKeys = Record<string, unknown>;

/** What the runner learned of a target agent's `initialize` answer, and how. */
export interface TargetDescription {
  /** Where it comes from: a handshake-only probe of the target, or nothing learned (`runner`). */
  source: "probe" | "runner";
  /** Where the probe started the agent: on this machine, or on the SSH target over ssh. */
  probedOn?: "local" | "ssh-target";
  /** Why nothing was learned of a target the runner does not probe (a daemon's, a registry agent's). */
  note?: string;
  /** The agent's protocol version. */
  protocolVersion?: number;
  /** The agent's capabilities. */
  agentCapabilities?: AgentCapabilities;
  /** The agent's auth methods (not passed on: the operator logs the agent in). */
  authMethods?: AuthMethod[];
  /** The agent's name and version. */
  agentInfo?: Implementation | null;
  /** Why nothing was learned, when a probe failed. */
  error?: string;
}

/** Learns what a target agent answers to `initialize` (cached by the caller). */
export type TargetDescriber = (config: RunConfig) => Promise<TargetDescription>;

/** The caller keys of a URL query (`/acp?provider=claude&mode=plan`). */
export function queryKeys(url: string): CallerKeys {
  const keys: CallerKeys = Object.create(null);
  for (const [name, value] of new URL(url).searchParams) keys[name] = value;
  return keys;
}

/**
 * The caller keys of a request's `_meta` (`{"runner": {"config": {…}}}`);
 * `config.invalid` when that is not an object of keys.
 */
export function metaKeys(meta: unknown): CallerKeys {
  const runner = isObject(meta) ? meta[ACP_META_KEY] : undefined;
  if (runner === undefined || runner === null) return {};
  const config = isObject(runner) ? runner.config : undefined;
  if (config === undefined) return {};
  if (!isObject(config)) {
    throw new RunnerError(
      "config.invalid",
      `_meta.${ACP_META_KEY}.config must be an object of run-config keys (as POST /v1/runs's config).`,
    );
  }
  return { ...config };
}

/**
 * The run config of a conversation: the operator's defaults, then the
 * connection's keys, then the session's. Throws `http.forbidden` for a key
 * or value the operator's floor refuses, `config.invalid` for a bad one.
 */
export function resolveTarget(
  serve: ServeConfig,
  ...layers: CallerKeys[]
): RunConfig {
  const merged: CallerKeys = Object.create(null);
  for (const layer of layers) {
    for (const [key, value] of Object.entries(layer)) {
      merged[key.replaceAll("_", "-")] = value;
    }
  }
  return resolveCallerConfig(serve, merged);
}

/**
 * The `initialize` answer of the runner fronting a target: the target's
 * protocol version and prompt capabilities; what the runner serves itself
 * (`session/load` of any conversation, `session/resume`, `session/list`);
 * no MCP transports of the client's (they would run where the agent runs)
 * and no auth methods (the operator logs the agent in).
 */
export function initializeAnswer(
  config: RunConfig,
  target: TargetDescription,
  clientVersion: number,
): InitializeResponse {
  const capabilities = target.agentCapabilities ?? {};
  return {
    protocolVersion: Math.min(clientVersion, target.protocolVersion ?? 1),
    agentCapabilities: {
      loadSession: true,
      promptCapabilities: capabilities.promptCapabilities ?? {},
      mcpCapabilities: { http: false, sse: false },
      sessionCapabilities: { list: {}, resume: {} },
    },
    authMethods: [],
    agentInfo: {
      name: "runner",
      title: target.agentInfo?.name
        ? `runner: ${target.agentInfo.title ?? target.agentInfo.name}`
        : "runner",
      version: RUNNER_VERSION,
    },
    _meta: {
      [ACP_META_KEY]: {
        capabilities_from: target.source,
        ...(target.probedOn ? { probed_on: target.probedOn } : {}),
        ...(target.note ? { capabilities_note: target.note } : {}),
        provider: config.provider,
        location: config.location,
        sandbox: config.sandbox,
        agent_info: target.agentInfo ?? null,
        ...(target.error ? { probe_error: target.error } : {}),
      },
    },
  };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
