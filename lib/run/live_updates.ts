/**
 * The agent's live `session/update`s as a run passes them on (`/acp`'s
 * clients, the daemon's relay), with secrets redacted. A secret the agent
 * cuts across text chunks is caught as it is in the run's deltas: the text
 * of consecutive chunks of one message runs through one stream redactor,
 * which holds back a tail that could begin a secret until the next chunk,
 * another update, or the turn's end.
 *
 * @module
 */

import {
  createStreamRedactor,
  redactDeep,
  type StreamRedactor,
} from "../secrets.ts";

/** A `session/update` as the agent sent it (`update` of a notification). */
export type LiveUpdate = Record<string, unknown>;

/** Redacts a stream of live updates. */
export interface LiveUpdateRedactor {
  /** Takes the agent's next update; returns what may be passed on now. */
  push(update: LiveUpdate): LiveUpdate[];
  /** Returns the text held back, as a last chunk: the turn has ended. */
  end(): LiveUpdate[];
}

const TEXT_CHUNKS = new Set([
  "agent_message_chunk",
  "agent_thought_chunk",
  "user_message_chunk",
]);

/** One message's text chunks, redacted as one text. */
interface OpenMessage {
  key: string;
  redactor: StreamRedactor;
  /** The last chunk, whose fields a released tail takes. */
  last: LiveUpdate;
}

/**
 * A {@linkcode LiveUpdateRedactor} for the secrets `secrets()` gives when
 * a message begins (the run's list may grow while it runs). What it returns,
 * joined per message, equals the message's whole text redacted; every other
 * update is redacted whole, after the text before it.
 */
export function createLiveUpdateRedactor(
  secrets: () => readonly string[],
): LiveUpdateRedactor {
  let open: OpenMessage | undefined;
  function close(): LiveUpdate[] {
    if (!open) return [];
    const tail = open.redactor.end();
    const last = open.last;
    open = undefined;
    return tail ? [withText(last, tail)] : [];
  }
  return {
    push(update) {
      const text = chunkText(update);
      if (text === undefined) {
        return [...close(), redactDeep(update, secrets())];
      }
      const key = messageKey(update);
      const released = open?.key === key ? [] : close();
      open ??= { key, redactor: createStreamRedactor(secrets()), last: update };
      open.last = redactDeep(update, secrets());
      const shown = open.redactor.push(text);
      return shown ? [...released, withText(open.last, shown)] : released;
    },
    end: close,
  };
}

/** The text of a text chunk, or undefined for any other update. */
function chunkText(update: LiveUpdate): string | undefined {
  if (!TEXT_CHUNKS.has(update.sessionUpdate as string)) return undefined;
  const content = update.content as { type?: unknown; text?: unknown };
  return content?.type === "text" && typeof content.text === "string"
    ? content.text
    : undefined;
}

/** Which message a text chunk continues: its kind and message id. */
function messageKey(update: LiveUpdate): string {
  return `${update.sessionUpdate}\n${JSON.stringify(update.messageId ?? null)}`;
}

/** `update` with its content's text replaced. */
function withText(update: LiveUpdate, text: string): LiveUpdate {
  return {
    ...update,
    content: { ...(update.content as Record<string, unknown>), text },
  };
}
