/**
 * The `turn.started` event of a follow-up turn: which turn of the run it is
 * and what the person sent, so every reader of the run (another tab, a
 * reload, another client) sees the follow-up, not only the client that sent
 * it. The first turn's input is the run's own (`prompt` on the run record).
 * Attachments are named, never carried. See `docs/events.md`.
 *
 * @module
 */

import { redactSecrets } from "../secrets.ts";
import { displayName, type RunInput } from "./prompt.ts";

/** The event type of a follow-up turn's start. */
export const TURN_STARTED = "turn.started";

/** An attachment of a follow-up as `turn.started` names it. */
export interface NamedAttachment {
  /** Its display name. */
  name: string;
  /** Its declared MIME type, when it had one. */
  mime_type?: string;
}

/**
 * `turn.started`'s data for turn `turn` (2 or more) with `input`, its text
 * and attachment names redacted of `secrets`.
 */
export function turnStartedData(
  turn: number,
  input: RunInput,
  secrets: readonly string[],
): Record<string, unknown> {
  const text = typeof input?.text === "string" ? input.text : "";
  const list = Array.isArray(input?.attachments) ? input.attachments : [];
  const attachments: NamedAttachment[] = list.map((attachment) => {
    const named: NamedAttachment = {
      name: redactSecrets(displayName(attachment ?? {}), secrets),
    };
    if (typeof attachment?.mime_type === "string") {
      named.mime_type = attachment.mime_type;
    }
    return named;
  });
  return {
    turn,
    input: {
      text: redactSecrets(text, secrets),
      ...(attachments.length ? { attachments } : {}),
    },
  };
}
