/**
 * What a conversation cost and what was said, in headless Chromium against a
 * real `runner serve` and the fixture agent: the run panel shows the
 * conversation's totals (tokens and costs added up, again once a new run of
 * it ends), and **Transcript: Markdown / JSON** saves the files the API
 * gives (puppeteer's download behaviour, into a temporary directory).
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import type { Browser, CDPSession } from "puppeteer-core";
import { agentCommand, apiFetch, withServe } from "../serve_test_helpers.ts";
import {
  assertQuiet,
  CONSOLE_ARGS,
  signIn,
  startRunFromPage,
  TOKEN,
  waitNewRun,
  waitStatus,
  withBrowser,
} from "../console_helpers.ts";
import { tempDir } from "../helpers.ts";

/** Lets the browser save downloads into `dir`, with events for each. */
async function downloadsInto(
  browser: Browser,
  dir: string,
): Promise<CDPSession> {
  const cdp = await browser.target().createCDPSession();
  await cdp.send("Browser.setDownloadBehavior", {
    behavior: "allow",
    downloadPath: dir,
    eventsEnabled: true,
  });
  return cdp;
}

/** Resolves to the file name of the next download once it completed. */
function nextDownload(cdp: CDPSession): Promise<string> {
  return new Promise((resolve, reject) => {
    let name = "";
    const begin = (event: { suggestedFilename: string }) =>
      name = event.suggestedFilename;
    const progress = (event: { state: string }) => {
      if (event.state === "inProgress") return;
      cdp.off("Browser.downloadWillBegin", begin);
      cdp.off("Browser.downloadProgress", progress);
      if (event.state === "completed") resolve(name);
      else reject(new Error(`the download ended ${event.state}`));
    };
    cdp.on("Browser.downloadWillBegin", begin);
    cdp.on("Browser.downloadProgress", progress);
  });
}

/** The API's transcript of `conversation` in `format`. */
async function apiTranscript(
  url: string,
  conversation: string,
  format: "md" | "json",
): Promise<string> {
  const response = await apiFetch(
    `${url}/v1/conversations/${conversation}/transcript?format=${format}`,
    { headers: { authorization: `Bearer ${TOKEN}` } },
  );
  assert.equal(response.status, 200);
  return await response.text();
}

/** The Markdown without its one line that names when it was exported. */
function withoutExportTime(markdown: string): string {
  return markdown.replace(/, exported [^\n]+\./, ".");
}

Deno.test("console: the run panel shows its conversation's totals, and the transcript downloads are the API's files", async () => {
  await withBrowser(async (browser) => {
    await withServe({ args: CONSOLE_ARGS }, async (serve, dir) => {
      const { page, alarms } = await signIn(browser, serve.url);
      await page.waitForSelector("#app:not([hidden])");
      // The agent reports tokens per turn and the session's running cost.
      const runId = await startRunFromPage(page, {
        prompt: "first",
        conversation: "c-usage",
        workspace: join(dir, "ws"),
        config: { "acp-command": agentCommand(["--usage", "turn"]) },
      });
      await waitStatus(page, "completed");
      const totals = (text: string) =>
        page.waitForFunction(
          `document.getElementById("conversation-usage").textContent === ${
            JSON.stringify(text)
          }`,
        );
      await totals(
        "conversation: 1 run · 100 prompt · 20 completion (162 total) · 0.25 USD",
      );

      // A new run of the idle conversation: its totals follow once it ends.
      await page.type("#follow-up-text", "second");
      await page.click("#follow-up-send");
      await waitNewRun(page, runId);
      await waitStatus(page, "completed");
      await totals(
        "conversation: 2 runs · 200 prompt · 40 completion (324 total) · 0.5 USD",
      );
      assert.match(
        await page.$eval("#run-usage", (n) => n.textContent!),
        /100 prompt · 20 completion \(162 total\) · 0\.25 USD$/,
      );

      const saved = tempDir();
      const cdp = await downloadsInto(browser, saved);
      const markdownFile = nextDownload(cdp);
      await page.click("#download-md");
      assert.equal(await markdownFile, "conversation-c-usage.transcript.md");
      const markdown = await Deno.readTextFile(
        join(saved, "conversation-c-usage.transcript.md"),
      );
      assert.match(markdown, /^# Conversation c-usage$/m);
      assert.match(markdown, /> first/);
      assert.match(markdown, /echo: second \(turn 2\)/);
      assert.equal(
        withoutExportTime(markdown),
        withoutExportTime(await apiTranscript(serve.url, "c-usage", "md")),
      );

      const jsonFile = nextDownload(cdp);
      await page.click("#download-json");
      assert.equal(await jsonFile, "conversation-c-usage.transcript.json");
      const document = JSON.parse(
        await Deno.readTextFile(
          join(saved, "conversation-c-usage.transcript.json"),
        ),
      );
      const fromApi = JSON.parse(
        await apiTranscript(serve.url, "c-usage", "json"),
      );
      assert.equal(document.format, "runner-transcript");
      assert.deepEqual(document.runs, fromApi.runs);
      assert.deepEqual(document.conversation, fromApi.conversation);
      assert.equal(document.runs.length, 2);
      assert.equal(
        await page.$eval("#download-error", (n) => n.textContent),
        "",
      );
      await cdp.detach();
      assertQuiet(alarms);
    });
  });
});
