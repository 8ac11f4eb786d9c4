/**
 * The console's controls end to end in headless Chromium against a real
 * `runner serve` and the fixture agent: start a run from the page, follow
 * it live (thought, plan, tool card, Markdown answer), answer its permission
 * request with an "always" option, steer a follow-up into the running turn,
 * send one to the idle conversation (a new run), and cancel.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import type { Page } from "puppeteer-core";
import { agentCommand } from "../serve_test_helpers.ts";
import {
  assertQuiet,
  signIn,
  startRunFromPage,
  transcriptText,
  waitNewRun,
  waitStatus,
  withOpenConsole,
} from "../console_helpers.ts";

async function optionNames(page: Page): Promise<string[]> {
  return await page.$$eval(
    ".permission:not(.decided) button.option",
    (nodes) =>
      nodes.map((n) => `${n.textContent}=${n.getAttribute("data-kind")}`),
  );
}

async function answer(page: Page, optionId: string): Promise<void> {
  const button =
    `.permission:not(.decided) button[data-option-id="${optionId}"]`;
  await page.waitForSelector(button);
  await page.click(button);
}

Deno.test("console: start a run, follow it live, approve always, steer a follow-up, new run of the idle conversation", async () => {
  await withOpenConsole(async ({ browser, serve, dir, page, alarms }) => {
    const runId = await startRunFromPage(page, {
      prompt: "first",
      conversation: "chat-console",
      workspace: join(dir, "ws"),
      permission: "ask",
      config: {
        "acp-command": agentCommand(["--permission", "--rich-updates"]),
      },
    });
    await waitStatus(page, "active");
    await page.waitForSelector(".permission:not(.decided) button.option");
    assert.deepEqual(await optionNames(page), [
      "Allow once=allow_once",
      "Always allow=allow_always",
      "Reject once=reject_once",
      "Always reject=reject_always",
    ]);
    assert.match(
      await page.$eval(".permission .countdown", (n) => n.textContent!),
      /^answer within \d+ min \d+ s$/,
    );
    // The tool card of the prelude: title, input, status and output.
    const tool = await page.$eval(
      '.tool[data-tool-call-id="tc-1"]',
      (n) => n.textContent!,
    );
    assert.match(tool, /Read README/);
    assert.match(tool, /"path": "README\.md"/);
    assert.match(tool, /completed/);
    assert.match(tool, /"ok": true/);
    assert.equal(
      await page.$eval("details.thought", (n) => n.hasAttribute("open")),
      false,
    );
    assert.match(await page.$eval(".plan", (n) => n.textContent!), /Read/);
    // A follow-up while the run waits is steered into it.
    await page.type("#follow-up-text", "more");
    assert.equal(
      await page.$eval("#follow-up-send", (n) => n.textContent),
      "Send to the running turn",
    );
    await page.click("#follow-up-send");
    await page.waitForFunction(
      `[...document.querySelectorAll(".bubble.user")].some((n) => n.textContent.includes("more"))`,
    );
    await answer(page, "allow_always");
    // The steered turn asks again; this time once.
    await page.waitForFunction(
      `document.querySelectorAll(".permission").length === 2`,
    );
    await answer(page, "allow_once");
    await waitStatus(page, "completed");
    const text = await transcriptText(page);
    assert.match(text, /permission: allow_always\s+echo: first \(turn 1\)/);
    assert.match(text, /permission: allow_once\s+echo: more \(turn 2\)/);
    assert.match(text, /Decided: allow_always \(allow_always\) by caller/);
    // The follow-up shows once, from its turn.started event (no longer pending).
    const bubbles = (p: Page) =>
      p.$$eval(".bubble.user", (nodes) => nodes.map((n) => n.textContent));
    const conversation = ["Youfirst", "Follow-up · turn 2more"];
    assert.deepEqual(await bubbles(page), conversation);
    assert.equal(await page.$eval("#pending", (n) => n.children.length), 0);
    // Another tab (its own session storage) sees the same conversation.
    const other = await signIn(browser, serve.url);
    const row = `li.run[data-run-id="${runId}"]`;
    await other.page.waitForSelector(row);
    await other.page.click(row);
    await waitStatus(other.page, "completed");
    await other.page.waitForFunction(
      `document.querySelectorAll(".bubble.user").length === 2`,
    );
    assert.deepEqual(await bubbles(other.page), conversation);
    assertQuiet(other.alarms);
    await other.page.close();
    assert.match(
      await page.$eval("#run-usage", (n) => n.textContent!),
      /1234 \/ 200000 tokens/,
    );
    // Idle now: the follow-up starts a new run of the conversation.
    assert.equal(
      await page.$eval("#follow-up-send", (n) => n.textContent),
      "Send as a new run",
    );
    await page.type("#follow-up-text", "again");
    await page.click("#follow-up-send");
    await waitNewRun(page, runId);
    await answer(page, "reject_once");
    await waitStatus(page, "completed");
    assert.match(await transcriptText(page), /permission: reject_once/);
    assert.match(
      await page.$eval("#run-meta", (n) => n.textContent!),
      /conversation chat-console/,
    );
    assertQuiet(alarms);
  });
});

Deno.test("console: Cancel ends an active run, whose badge shows it is active", async () => {
  await withOpenConsole(async ({ dir, page, alarms }) => {
    const runId = await startRunFromPage(page, {
      prompt: "wait forever",
      workspace: join(dir, "ws"),
      config: { "acp-command": agentCommand(["--stall-prompt"]) },
    });
    await waitStatus(page, "active");
    const row = `li.run[data-run-id="${runId}"] .badge.active`;
    await page.waitForSelector(row);
    assert.equal(await page.$eval(row, (n) => n.textContent), "active");
    await page.click("#cancel");
    await waitStatus(page, "cancelled");
    assert.match(await transcriptText(page), /run\.cancelled/);
    assert.equal(
      await page.$eval("#cancel", (n) => n.hasAttribute("hidden")),
      true,
    );
    // A run without a conversation takes no follow-ups: no box for them.
    assert.equal(
      await page.$eval("#follow-up", (n) => n.hasAttribute("hidden")),
      true,
    );
    assertQuiet(alarms);
  });
});
