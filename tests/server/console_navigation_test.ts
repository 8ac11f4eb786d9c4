/**
 * Finding one's way in the console, in headless Chromium against a real
 * `runner serve`: a full page of runs and no more offers no older page; on a
 * phone an opened run comes into view and a back button leads to the list;
 * the open run and the filters survive a reload and the images toggle; and
 * with images allowed, an agent's `http:` image (which the page's CSP would
 * block) is not requested while an `https:` one is.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import type { Page } from "puppeteer-core";
import {
  agentCommand,
  assertStatus,
  postJson,
  withServe,
} from "../serve_test_helpers.ts";
import {
  assertQuiet,
  CONSOLE_ARGS,
  DESKTOP,
  signIn,
  TOKEN,
  waitStatus,
  withBrowser,
} from "../console_helpers.ts";

const AUTH = { authorization: `Bearer ${TOKEN}` };
const IMAGES = "![plain](http://127.0.0.1:9/plain.png) " +
  "![secure](https://127.0.0.1:9/secure.png)";

async function finishedRun(
  url: string,
  workspace: string,
  run: { id: string; conversation: string; flags: string[] },
): Promise<void> {
  const response = await postJson(`${url}/v1/runs`, {
    run_id: run.id,
    conversation_id: run.conversation,
    input: { text: `prompt of ${run.id}` },
    config: {
      provider: "custom",
      workspace,
      "acp-command": agentCommand(run.flags),
    },
    stream: false,
  }, AUTH);
  await assertStatus(response, 200);
}

/** Waits until the top of `id` is inside the viewport (give or take a fraction of a pixel). */
function inView(page: Page, id: string): Promise<void> {
  return page.waitForFunction(
    `(() => { const top = document.getElementById(${
      JSON.stringify(id)
    }).getBoundingClientRect().top;
      return top > -2 && top < innerHeight; })()`,
  ).then(() => {});
}

Deno.test("console: 20 runs are one page; on a phone a run opens in view with a way back; a reload and the images toggle keep the run and filters", async () => {
  await withBrowser(async (browser) => {
    await withServe({ args: CONSOLE_ARGS }, async (serve, dir) => {
      const workspace = join(dir, "ws");
      // The oldest run, last in the list, answers with two images.
      await finishedRun(serve.url, workspace, {
        id: "nav-00",
        conversation: "nav-odd",
        flags: ["--text", IMAGES],
      });
      // Four at a time: under the server's limit of concurrent runs.
      for (let i = 1; i < 20; i += 4) {
        await Promise.all(
          Array.from(
            { length: Math.min(4, 20 - i) },
            (_, k) =>
              finishedRun(serve.url, workspace, {
                id: `nav-${String(i + k).padStart(2, "0")}`,
                conversation: `nav-${i + k}`,
                flags: [],
              }),
          ),
        );
      }
      const { page, alarms } = await signIn(browser, serve.url);
      await page.waitForFunction(
        `document.querySelectorAll("li.run[data-run-id]").length === 20`,
      );
      assert.equal(
        await page.$eval("#runs-older", (n) => n.hasAttribute("disabled")),
        true,
        "a page of exactly 20 runs offered an empty older page",
      );
      await page.click('li.run[data-run-id="nav-00"]');
      await inView(page, "run-panel");
      await waitStatus(page, "completed");
      await page.click("#back-to-runs");
      await inView(page, "runs-panel");
      // The new controls fit a phone: the form with its keys, the run's carried settings.
      await page.click("#new-run-open");
      await page.click("#new-keys summary");
      await page.$eval(
        "#follow-up-settings",
        (n) => n.setAttribute("open", ""),
      );
      assert.equal(
        await page.evaluate(
          "document.documentElement.scrollWidth <= innerWidth",
        ),
        true,
        "the page is wider than the phone",
      );
      await page.click("#new-run-open");
      await page.type("#filter-conversation", "nav-odd");
      await page.click("#filters button[type=submit]");
      await page.waitForFunction(
        `document.querySelectorAll("li.run[data-run-id]").length === 1`,
      );
      await page.reload({ waitUntil: "load" });
      await waitStatus(page, "completed");
      assert.equal(
        await page.$eval("#run-title", (n) => n.textContent),
        "nav-00",
      );
      assert.equal(
        await page.$eval(
          "#filter-conversation",
          (n) => (n as unknown as { value: string }).value,
        ),
        "nav-odd",
      );
      await page.waitForFunction(
        `document.querySelectorAll("li.run[data-run-id]").length === 1`,
      );
      // Images: the page reloads with ?images=1 and the same run open.
      await Promise.all([
        page.waitForNavigation({ waitUntil: "load" }),
        page.click("#images"),
      ]);
      assert.equal(new URL(page.url()).search, "?images=1");
      await waitStatus(page, "completed");
      assert.equal(
        await page.$eval("#run-title", (n) => n.textContent),
        "nav-00",
      );
      await page.waitForSelector(".bubble.agent img");
      const images = await page.$$eval(
        ".bubble.agent img",
        (nodes) => nodes.map((n) => [n.getAttribute("src"), n.alt]),
      );
      assert.deepEqual(images, [
        [null, "[image not loaded: not https: plain]"],
        ["https://127.0.0.1:9/secure.png", "secure"],
      ]);
      // On a desktop screen both panels show side by side: no back button.
      await page.setViewport(DESKTOP);
      assert.equal(
        await page.evaluate(
          `getComputedStyle(document.getElementById("back-to-runs")).display`,
        ),
        "none",
      );
      assertQuiet(alarms);
    });
  });
});
