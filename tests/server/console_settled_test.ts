/**
 * The console's "settled" run status means the transcript shows the whole
 * run: what waits to be painted at the next animation frame is painted
 * first. A tab that gets no frames (a loaded machine, a hidden tab) must
 * still show the answer once the run is called ended.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import {
  assertQuiet,
  startRunFromPage,
  transcriptText,
  waitStatus,
  withOpenConsole,
} from "../console_helpers.ts";
import { makeGate } from "../engine_helpers.ts";
import { agentCommand } from "../helpers.ts";

Deno.test("console: a run called ended shows its whole answer, also when no frame is painted", async () => {
  await withOpenConsole(async ({ dir, page, alarms }) => {
    const gate = await makeGate();
    await startRunFromPage(page, {
      prompt: "painted",
      workspace: join(dir, "ws"),
      config: {
        "acp-command": agentCommand([
          ...["--chunks", "3", "--gate-chunks"],
          ...["--gate-fifo", gate.path],
        ]),
      },
    });
    await waitStatus(page, "active");
    // From now on no animation frame comes.
    await page.evaluate("window.requestAnimationFrame = () => 0");
    await gate.release();
    await gate.release();
    // (Puppeteer's default wait polls on animation frames: poll on changes.)
    await page.waitForFunction(
      `document.getElementById("run-status").dataset.settled === "yes"`,
      { polling: "mutation" },
    );
    assert.equal(
      await page.$eval("#run-status", (node) => node.textContent),
      "completed",
    );
    assert.match(await transcriptText(page), /echo: painted \(turn 1\)/);
    assertQuiet(alarms);
  });
});
