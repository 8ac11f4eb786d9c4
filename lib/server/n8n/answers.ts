/**
 * What a LangBot user reads from the n8n webhook besides the agent's text: a
 * failure as one readable line (LangBot shows `item` text and nothing else),
 * and answers whose caller went away before they were ready (LangBot's
 * timeout), delivered ahead of the conversation's next answer.
 *
 * @module
 */

import type { RunEvent } from "../../events.ts";
import type { RunStore } from "../../store/types.ts";
import { redactSecrets } from "../../secrets.ts";
import { finalMessage } from "../stream_shape.ts";

/** How a failure's code reads to a chat user, by code or code family. */
const FAILURE_LEADS: Array<[RegExp, string]> = [
  [/^run\.timeout$/, "The agent did not finish in time"],
  [/^acp\.empty_response$/, "The agent finished without an answer"],
  [/^(run\.cancelled|runner\.)/, "The run was stopped"],
  [
    /^(acp\.(missing_binary|spawn_error|start_timeout|initialize_timeout|incompatible_protocol|unauthenticated|session_missing|session_failed)|agent_runtime\.|config\.|provider\.)/,
    "The agent could not start",
  ],
];

/**
 * A failed run as one line a chat user can read, e.g.
 * `⚠ The agent could not start: … (acp.missing_binary)`.
 */
export function readableFailure(code: string, message: string): string {
  const lead = FAILURE_LEADS.find(([pattern]) => pattern.test(code))?.[1] ??
    "The agent run failed";
  return `⚠ ${lead}: ${message} (${code})`;
}

/** Runs whose answer never reached their webhook caller, by conversation. */
export interface PendingAnswers {
  /** Remembers that these runs' answers were not delivered. */
  add(conversationId: string, runIds: string[]): void;
  /** Takes (and forgets) the conversation's undelivered runs, oldest first. */
  take(conversationId: string): string[];
}

/** At most this many undelivered answers are kept per conversation. */
const MAX_PENDING_PER_CONVERSATION = 5;

/** At most this many conversations hold undelivered answers. */
const MAX_CONVERSATIONS = 1_000;

/** Makes an empty, bounded {@linkcode PendingAnswers} (in memory). */
export function createPendingAnswers(): PendingAnswers {
  const pending = new Map<string, string[]>();
  return {
    add(conversationId, runIds) {
      if (!runIds.length) return;
      const list = [...(pending.get(conversationId) ?? []), ...runIds];
      pending.delete(conversationId);
      pending.set(conversationId, list.slice(-MAX_PENDING_PER_CONVERSATION));
      if (pending.size > MAX_CONVERSATIONS) {
        pending.delete(pending.keys().next().value!);
      }
    },
    take(conversationId) {
      const list = pending.get(conversationId) ?? [];
      pending.delete(conversationId);
      return list;
    },
  };
}

/** What a stored run answered: its final message, or its failure as a readable line. */
export async function storedAnswer(
  store: RunStore,
  runId: string,
  secrets: string[],
): Promise<string> {
  const events = await store.getEvents(runId);
  const failed = events.find((event) => event.type === "run.failed");
  if (failed) return failureText(failed, secrets);
  // The last completion's text (put back from the deltas for older, lean runs).
  return finalMessage(events);
}

/** A `run.failed` event as a readable line, secrets redacted. */
export function failureText(event: RunEvent, secrets: string[]): string {
  return readableFailure(
    String(event.data.code ?? "runner.internal"),
    redactSecrets(String(event.data.error ?? "The run failed."), secrets),
  );
}

/**
 * The text that goes ahead of a conversation's new answer: the answers of its
 * earlier messages that were not delivered in time, each marked as such.
 */
export async function earlierAnswersText(
  store: RunStore,
  { runIds, secrets }: { runIds: string[]; secrets: string[] },
): Promise<string> {
  const answers = await Promise.all(
    runIds.map((runId) => storedAnswer(store, runId, secrets)),
  );
  return answers
    .filter((text) => text)
    .map((text) =>
      `↩ The answer to your earlier message (it was not ready in time):\n\n${text}\n\n---\n\n`
    )
    .join("");
}
