/**
 * kill -9 of a real `runner serve` (SQLite store) at a random moment of an
 * SSE stream, eight times: nothing the client saw is lost after the restart
 * (see `serve_crash_helpers.ts`).
 *
 * @module
 */

import assert from "node:assert/strict";
import { crashTries } from "../serve_crash_helpers.ts";
import { startServe, tempDir } from "../serve_test_helpers.ts";

Deno.test("kill -9 of serve at a random moment of a stream: the client's events survive, the restart's terminal event comes after them, a resume ends with it", async () => {
  const dir = await tempDir();
  try {
    const interrupted = await crashTries({
      dir,
      tries: 8,
      start: (dataDir) =>
        startServe({ dataDir, args: ["--allow-custom-commands"] }),
    });
    assert.ok(interrupted > 0, "no kill interrupted a run");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
