/**
 * Removal of terminal escape sequences and control characters from a client
 * terminal's output before it is redacted and shown: what a reader sees (the
 * console strips them, a person's terminal hides them) is what the redactor
 * must see, or a secret printed with an escape in its middle shows whole.
 *
 * @module
 */

const CONTROL =
  // deno-lint-ignore no-control-regex -- matching control characters is the point
  /\x1b\[[0-?]*[ -\/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]|\x9b[0-?]*[ -\/]*[@-~]|[\x00-\x08\x0b-\x1f\x7f-\x9f]/g;
// An escape sequence cut off at the end of a chunk.
const OPEN_ESCAPE =
  // deno-lint-ignore no-control-regex -- matching ESC is the point
  /(?:\x1b(?:\[[0-?]*[ -\/]*|\][^\x07\x1b]{0,256})?|\x9b[0-?]*[ -\/]*)$/;

/** Strips escapes and control characters from output that comes in chunks. */
export interface ControlStripper {
  /**
   * Takes the next chunk; returns it without escapes and control characters
   * (tab and newline stay). An escape the chunk ends in the middle of is
   * held back until the next chunk completes it.
   */
  push(text: string): string;
}

/** A {@linkcode ControlStripper} for one terminal's output. */
export function createControlStripper(): ControlStripper {
  let open = "";
  return {
    push(text) {
      let raw = open + text;
      const cut = raw.match(OPEN_ESCAPE);
      open = cut ? cut[0] : "";
      if (cut) raw = raw.slice(0, cut.index);
      return raw.replace(CONTROL, "");
    },
  };
}
