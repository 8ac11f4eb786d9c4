/**
 * What explains a run that ended without an answer: a permission request
 * that was refused (by policy, a person, the timeout's fallback, or answered
 * `cancelled`), or a tool call that failed. Agents end such a turn in
 * different ways (claude and codex `cancelled`; opencode, qwen-code and kilo
 * `end_turn` with no text), so the run's failure names the cause instead of
 * the stop reason. See `docs/runs.md`, step 6.
 *
 * @module
 */

import type {
  RequestPermissionRequest,
  RequestPermissionResponse,
} from "@agentclientprotocol/sdk";
import { RunnerError } from "../errors.ts";

/** A permission request of the run that was not allowed. */
export interface RejectedPermission {
  /** The tool call's title (or id) as the agent named it. */
  tool: string;
  /** The chosen reject option's kind, or `cancelled`. */
  answer: string;
}

/** A tool call of the run that ended with status `failed`. */
export interface FailedTool {
  /** The tool call's title (or kind, or id). */
  tool: string;
  /** What the agent reported as the failure, shortened; undefined if nothing. */
  error?: string;
}

/** The refusal in a permission answer, or undefined when it allows the tool. */
export function rejectionOf(
  request: RequestPermissionRequest,
  answer: RequestPermissionResponse,
): RejectedPermission | undefined {
  const tool = shorten(
    request.toolCall?.title || request.toolCall?.toolCallId || "a tool",
    120,
  );
  const { outcome } = answer;
  if (outcome.outcome !== "selected") return { tool, answer: "cancelled" };
  const chosen = request.options?.find((option) =>
    option.optionId === outcome.optionId
  );
  return chosen?.kind.startsWith("reject")
    ? { tool, answer: chosen.kind }
    : undefined;
}

/**
 * The failure a `tool_call` or `tool_call_update` reports, or undefined when
 * it does not end the call as `failed`. `name` is the call's name as the
 * run's events know it.
 */
export function toolFailureOf(
  update: Record<string, unknown>,
  name: string | undefined,
): FailedTool | undefined {
  if (update.status !== "failed") return undefined;
  const tool = shorten(
    name ?? String(update.title || update.kind || update.toolCallId || "tool"),
    120,
  );
  const output = update.rawOutput ?? contentText(update.content);
  if (output === undefined || output === null || output === "") {
    return { tool };
  }
  const text = typeof output === "string" ? output : JSON.stringify(output);
  return { tool, error: shorten(text.replace(/\s+/g, " ").trim(), 300) };
}

/** `run.permission_rejected`: the run ended unanswered after a refusal. */
export function permissionRejectedError(
  rejected: RejectedPermission,
): RunnerError {
  return new RunnerError(
    "run.permission_rejected",
    `The agent ended the turn without an answer after its permission request for "${rejected.tool}" was refused (${rejected.answer}). Allow the tool (permission-decision=allow_once or allow_always, or approve it when asked) and run again, or ask for something that needs no permission; running it again as it is refuses the tool again.`,
  );
}

/** `run.tool_failed`: the run ended unanswered after a failed tool call. */
export function toolFailedError(failed: FailedTool): RunnerError {
  const error = failed.error ? `: ${failed.error}` : "";
  return new RunnerError(
    "run.tool_failed",
    `The agent ended the turn without an answer after the tool "${failed.tool}" failed${error}. Fix what made it fail (a missing command, file or access) or rephrase the request, then run again; the tool.call.completed event holds the agent's report.`,
  );
}

function contentText(content: unknown): string | undefined {
  if (!Array.isArray(content)) return undefined;
  const texts = content.flatMap((item) => {
    const block = (item as { content?: { type?: string; text?: unknown } })
      ?.content;
    return block?.type === "text" && typeof block.text === "string"
      ? [block.text]
      : [];
  });
  return texts.length ? texts.join("\n") : undefined;
}

function shorten(text: string, limit: number): string {
  return text.length > limit ? `${text.slice(0, limit - 1)}…` : text;
}
