/**
 * The console's permission card on a phone-sized screen: very long option
 * names (with and without spaces), a long title, path and command line wrap
 * inside the card and never widen the page; so do a tool card's long title,
 * command line and output, and a long inline code span of the answer.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { agentCommand, postJson, readSse } from "../serve_test_helpers.ts";
import {
  assertQuiet,
  PHONE,
  TOKEN,
  waitStatus,
  withOpenConsole,
} from "../console_helpers.ts";

const WORD = "Allow-this-option-name-has-no-spaces-at-all-".repeat(8);
const SPACED = "Reject this option whose name goes on and on ".repeat(8);
const CALL = {
  kind: "execute",
  title: "Run-".repeat(60),
  path: "/very/long/path/".repeat(20) + "file.txt",
  input: { command: "x".repeat(380) },
  names: { allow_once: WORD, reject_once: SPACED },
};

const TOOL = [
  "tool-with",
  "Run-the-very-long-tool-title-".repeat(12),
  "npm-run-a-command-line-without-any-spaces-".repeat(10),
  "output-".repeat(80),
];

/** Widths the card's content reaches, and the page's. */
function widths(page: import("puppeteer-core").Page) {
  return page.evaluate(`(() => {
    const card = document.querySelector(".permission").getBoundingClientRect();
    const parts = [...document.querySelectorAll(".permission *")];
    return {
      page: document.documentElement.scrollWidth,
      viewport: innerWidth,
      cardRight: card.right,
      widest: Math.max(...parts.map((n) => n.getBoundingClientRect().right)),
    };
  })()`) as Promise<
    { page: number; viewport: number; cardRight: number; widest: number }
  >;
}

Deno.test("console: long permission option names, title, path and command line wrap inside the card on a phone", async () => {
  await withOpenConsole(async ({ serve, dir, page, alarms }) => {
    const response = await postJson(`${serve.url}/v1/runs`, {
      input: { text: "run it" },
      config: {
        provider: "custom",
        workspace: join(dir, "ws"),
        "permission-decision": "ask",
        "acp-command": agentCommand([
          "--permission-calls",
          JSON.stringify([CALL]),
          "--script",
          JSON.stringify([TOOL, ["text", "`" + "y".repeat(400) + "`"]]),
        ]),
      },
    }, { authorization: `Bearer ${TOKEN}` });
    assert.equal(response.status, 200);
    const messages = readSse(response.body!);
    const runId = JSON.parse((await messages.next()).value!.data).run_id;
    const drained = (async () => {
      for await (const _ of messages) { /* keep the stream read */ }
    })();
    await page.waitForSelector(`li.run[data-run-id="${runId}"]`);
    await page.click(`li.run[data-run-id="${runId}"]`);
    await page.waitForSelector(
      '.permission button[data-option-id="allow_once"]',
    );
    assert.equal(
      await page.$eval(
        '.permission button[data-option-id="allow_once"]',
        (n) => n.textContent,
      ),
      WORD,
    );
    const seen = await widths(page);
    assert.ok(
      seen.page <= seen.viewport,
      `the page is ${seen.page} px wide on a ${seen.viewport} px screen`,
    );
    assert.ok(
      seen.widest <= seen.cardRight + 0.5,
      `the card's content reaches ${seen.widest} px, the card ends at ${seen.cardRight} px`,
    );
    await page.click('.permission button[data-option-id="reject_once"]');
    await waitStatus(page, "completed");
    // The tool card's long title, command line and output, opened, wrap too.
    await page.waitForSelector(".tool .title");
    await page.$$eval(
      "details",
      (nodes) => nodes.forEach((n) => n.setAttribute("open", "")),
    );
    assert.equal(
      await page.$eval(".tool .title", (n) => n.textContent),
      TOOL[1],
    );
    const after = await widths(page);
    assert.ok(
      after.page <= after.viewport,
      `with the tool card open the page is ${after.page} px wide`,
    );
    await drained;
    assertQuiet(alarms);
  }, { viewport: PHONE });
});
