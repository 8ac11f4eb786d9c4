/**
 * Checks of the stream redactor step by step: what each piece pushed shows
 * and what its end shows.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createStreamRedactor } from "../lib/secrets.ts";

/** One piece pushed into a stream redactor and the text that push shows. */
export type StreamStep = [piece: string, shown: string];

/**
 * Pushes each step's piece into a new stream redactor over `secrets`,
 * asserting what each push shows, then that its end shows `end`.
 */
export function assertStreamShows(
  secrets: string[],
  steps: StreamStep[],
  end = "",
): void {
  const stream = createStreamRedactor(secrets);
  for (const [index, [piece, shown]] of steps.entries()) {
    assert.equal(stream.push(piece), shown, `push ${index + 1}: ${piece}`);
  }
  assert.equal(stream.end(), end, "the end");
}
