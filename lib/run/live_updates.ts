/**
 * The agent's live `session/update`s as a run passes them on (`/acp`'s
 * clients, the daemon's relay), with secrets redacted. A secret the agent
 * cuts across text chunks is caught as it is in the run's deltas: the text
 * of each kind of chunk runs through one stream redactor for the turn, which
 * holds back a tail that could begin a secret until that kind's next chunk
 * or the turn's end.
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

/** One kind of text chunk's redactor while the turn lasts. */
interface OpenText {
  redactor: StreamRedactor;
  /** The last chunk of the kind, whose fields a released tail takes. */
  last: LiveUpdate;
}

/**
 * A {@linkcode LiveUpdateRedactor} for the secrets `secrets()` gives when
 * a turn's first text of a kind comes (the run's list may grow while it
 * runs). Each kind of text chunk (message, thought) is redacted as one text
 * until the turn ends, whatever comes between its chunks (other updates,
 * another kind, another `messageId`): a client that joins the chunks must
 * not see a secret the agent cut in two around a tool call. What it
 * returns, joined per kind, equals that kind's whole text redacted; every
 * other update is redacted whole.
 */
export function createLiveUpdateRedactor(
  secrets: () => readonly string[],
): LiveUpdateRedactor {
  const open = new Map<string, OpenText>();
  return {
    push(update) {
      const text = chunkText(update);
      if (text === undefined) return [redactDeep(update, secrets())];
      const kind = update.sessionUpdate as string;
      let held = open.get(kind);
      if (!held) {
        held = { redactor: createStreamRedactor(secrets()), last: update };
        open.set(kind, held);
      }
      held.last = redactDeep(update, secrets());
      const shown = held.redactor.push(text);
      return shown ? [withText(held.last, shown)] : [];
    },
    end() {
      const released: LiveUpdate[] = [];
      for (const held of open.values()) {
        const tail = held.redactor.end();
        if (tail) released.push(withText(held.last, tail));
      }
      open.clear();
      return released;
    },
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

/** `update` with its content's text replaced. */
function withText(update: LiveUpdate, text: string): LiveUpdate {
  return {
    ...update,
    content: { ...(update.content as Record<string, unknown>), text },
  };
}
