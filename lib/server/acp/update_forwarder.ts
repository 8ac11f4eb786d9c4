/**
 * How a turn's `session/update`s reach an `/acp` client: in order, one
 * `session/update` notification each, with at most a set number of bytes
 * waiting for a client that reads slowly. Text chunks that wait together
 * (one read of the agent's output brings many; a busy connection holds
 * them) travel as one: the client sees the same text in fewer messages.
 *
 * @module
 */

import type * as acp from "@agentclientprotocol/sdk";
import type { SessionUpdate } from "@agentclientprotocol/sdk";

/** Passes a turn's updates on in order, holding at most `maxBytes` the client has not taken. */
export interface UpdateForwarder {
  /** Queues one update; once the queue is full it and the rest of the turn are dropped. */
  send(update: SessionUpdate): void;
  /** Resolves once everything queued was sent or failed. */
  flushed(): Promise<void>;
  /** Updates dropped because the client did not take them. */
  dropped(): number;
}

/** What {@linkcode createUpdateForwarder} needs. */
export interface UpdateForwarderOptions {
  /** The connection to the client. */
  client: acp.AgentContext;
  /** The session the updates belong to. */
  sessionId: string;
  /** Bytes of updates the client may leave unread before the rest is dropped. */
  maxBytes: number;
  /** Called once, when the first update is dropped. */
  onFirstDrop: () => void;
}

/** An update waiting to be sent, and its size as counted against the limit. */
interface Waiting {
  update: SessionUpdate;
  bytes: number;
}

/**
 * The forwarder of one turn. The SDK holds `maxBytes` of output a client has
 * not read, then makes sends wait; the run does not wait for the client, so
 * what waits here is bounded as well. A client that falls that far behind
 * gets the turn's first updates, the answer (with the count dropped), and
 * `session/load` for the rest.
 */
export function createUpdateForwarder(
  options: UpdateForwarderOptions,
): UpdateForwarder {
  const { client, sessionId, maxBytes } = options;
  const queue: Waiting[] = [];
  let pendingBytes = 0;
  let dropped = 0;
  let sending: Promise<void> | undefined;

  async function drain() {
    for (let next = queue.shift(); next; next = queue.shift()) {
      try {
        await client.notify("session/update", {
          sessionId,
          update: next.update,
        });
      } catch { /* the connection is gone; the run goes on */ }
      pendingBytes -= next.bytes;
    }
    sending = undefined;
  }

  return {
    send(update) {
      if (dropped) {
        dropped++;
        return;
      }
      const bytes = sizeOf(update);
      if (pendingBytes + bytes > maxBytes) {
        dropped++;
        options.onFirstDrop();
        return;
      }
      pendingBytes += bytes;
      const last = queue.at(-1);
      if (last && appendText(last.update, update)) {
        last.bytes += bytes;
        return;
      }
      queue.push({ update: ownText(update), bytes });
      sending ??= drain();
    },
    flushed: () => sending ?? Promise.resolve(),
    dropped: () => dropped,
  };
}

/** A text chunk with nothing but its kind, text and message id. */
type PlainChunk = SessionUpdate & {
  sessionUpdate: "agent_message_chunk" | "agent_thought_chunk";
  content: { type: "text"; text: string };
  messageId?: string | null;
};

/** Whether `update` is a {@linkcode PlainChunk}: text only, no `_meta`, no annotations. */
function isPlainChunk(update: SessionUpdate): update is PlainChunk {
  if (
    update.sessionUpdate !== "agent_message_chunk" &&
    update.sessionUpdate !== "agent_thought_chunk"
  ) return false;
  const content = update.content as Record<string, unknown>;
  if (content.type !== "text" || typeof content.text !== "string") {
    return false;
  }
  for (const key in content) if (key !== "type" && key !== "text") return false;
  for (const key in update) {
    if (key !== "sessionUpdate" && key !== "content" && key !== "messageId") {
      return false;
    }
  }
  return true;
}

/**
 * Appends `next`'s text to `waiting` when both are plain chunks of the same
 * kind and message; returns whether it did.
 */
function appendText(waiting: SessionUpdate, next: SessionUpdate): boolean {
  if (!isPlainChunk(waiting) || !isPlainChunk(next)) return false;
  if (
    waiting.sessionUpdate !== next.sessionUpdate ||
    (waiting.messageId ?? null) !== (next.messageId ?? null)
  ) return false;
  waiting.content.text += next.content.text;
  return true;
}

/** `update`, with a content of its own when text may be appended to it. */
function ownText(update: SessionUpdate): SessionUpdate {
  return isPlainChunk(update)
    ? { ...update, content: { ...update.content } }
    : update;
}

/** About what `update` costs the client's connection, in bytes. */
function sizeOf(update: SessionUpdate): number {
  // A chunk's text is its size but for a constant; anything else is rarer.
  return isPlainChunk(update)
    ? update.content.text.length + 96
    : JSON.stringify(update).length;
}
