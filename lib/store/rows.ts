/**
 * Between SQLite (or PostgreSQL) rows and the store's types: session keys as
 * column values, session and run rows as records, and driver errors as
 * `store.unavailable`.
 *
 * @module
 */

import { RunnerError } from "../errors.ts";
import { costOf, type RunUsage, type UsageCost, usageFrom } from "../events.ts";
import type {
  RunRecord,
  RunStatus,
  SessionKey,
  SessionRecord,
  StoredSession,
} from "./types.ts";

type Row = Record<string, unknown>;

/** The `store.unavailable` failure for a failed `action`, with what to check. */
export function unavailable(action: string, error: unknown): RunnerError {
  const reason = error instanceof Error ? error.message : String(error);
  const hint = error instanceof Deno.errors.NotCapable
    ? "grant --allow-read and --allow-write for the data directory"
    : "check that the data directory (RUNNER_DATA_DIR) is writable and the disk is not full";
  return new RunnerError(
    "store.unavailable",
    `Could not ${action}: ${reason}; ${hint}.`,
    {
      cause: error,
    },
  );
}

/** A session key's values in the sessions table's column order. */
export function sessionKeyValues(key: SessionKey): string[] {
  return [
    key.conversationId,
    key.provider,
    key.location,
    key.target,
    key.workspace,
    key.agentCommand,
  ];
}

/** A sessions-table row as a {@linkcode StoredSession}. */
export function toStoredSession(row: Row): StoredSession {
  const settings = settingsOf(row.settings_json);
  const sessionId = String(row.session_id);
  const cost = sessionCostOf(row.cost_json, sessionId);
  return {
    sessionId,
    updatedAt: Number(row.updated_at),
    ...(settings ? { settings } : {}),
    ...(cost ? { cost } : {}),
  };
}

/** A session's running cost as the `cost_json` column stores it. */
export function sessionCostJson(
  sessionCost: { sessionId: string; cost: UsageCost },
): string {
  return JSON.stringify({
    session_id: sessionCost.sessionId,
    ...sessionCost.cost,
  });
}

/**
 * The running cost in a `cost_json` column, if it is `sessionId`'s (a cost
 * stays behind when a new session replaces the old one under its key).
 */
function sessionCostOf(
  value: unknown,
  sessionId: string,
): UsageCost | undefined {
  if (typeof value !== "string") return undefined;
  try {
    const parsed = JSON.parse(value);
    return parsed?.session_id === sessionId ? costOf(parsed) : undefined;
  } catch {
    return undefined;
  }
}

/** A whole sessions-table row as a {@linkcode SessionRecord}. */
export function toSessionRecord(row: Row): SessionRecord {
  return {
    conversationId: String(row.conversation_id),
    provider: String(row.provider),
    location: String(row.location),
    target: String(row.target),
    workspace: String(row.workspace),
    agentCommand: String(row.agent_command),
    ...toStoredSession(row),
  };
}

/** The remembered settings in a `settings_json` column; none when empty or unreadable. */
function settingsOf(value: unknown): Record<string, unknown> | undefined {
  if (typeof value !== "string") return undefined;
  try {
    const parsed = JSON.parse(value);
    return typeof parsed === "object" && parsed !== null &&
        !Array.isArray(parsed)
      ? parsed
      : undefined;
  } catch {
    return undefined;
  }
}

/** A runs-table row (SQLite or PostgreSQL) as a {@linkcode RunRecord}. */
export function toRunRecord(row: Row): RunRecord {
  const optional = (value: unknown) => value === null ? undefined : value;
  return {
    runId: String(row.run_id),
    conversationId: optional(row.conversation_id) as string | undefined,
    status: String(row.status) as RunStatus,
    config: JSON.parse(String(row.config_json)),
    prompt: optional(row.prompt) as string | undefined,
    code: optional(row.code) as string | undefined,
    error: optional(row.error) as string | undefined,
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
    finishedAt: row.finished_at === null || row.finished_at === undefined
      ? undefined
      : Number(row.finished_at),
    ...usageField(row.usage_json),
  };
}

/** A run's usage as its `usage_json` column holds it (null: none reported). */
export function usageJson(usage: RunUsage | undefined): string | null {
  const kept = usageFrom(usage);
  return kept ? JSON.stringify(kept) : null;
}

function usageField(value: unknown): { usage?: RunUsage } {
  if (typeof value !== "string") return {};
  try {
    const usage = usageFrom(JSON.parse(value));
    return usage ? { usage } : {};
  } catch {
    return {};
  }
}
