/**
 * The operator console in a real headless Chromium (Debian's `chromium`,
 * driven by puppeteer-core) against a real `runner serve` with an API token:
 * sign in, see a run appear and stream, approve and reject permission
 * requests from the page, and no access without the token.
 *
 * Set `RUNNER_CONSOLE_SCREENSHOT=docs/console.png` to refresh the README's
 * screenshot.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import puppeteer, { type Browser, type Page } from "puppeteer-core";
import {
  fixtureConfig,
  postJson,
  readSse,
  withServe,
} from "./serve_test_helpers.ts";

const TOKEN = "console-test-token-Vb7Qw2Lm9Xk4Pz8Tn3Rj6Hs1";
const ARGS = ["--allow-custom-commands", "--api-token", TOKEN];
const CHROMIUM = Deno.env.get("CHROMIUM_PATH") ?? "/usr/bin/chromium";

async function withBrowser(body: (browser: Browser) => Promise<void>) {
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
      "--disable-quic",
    ],
  });
  try {
    await body(browser);
  } finally {
    await browser.close();
  }
}

/** Opens the console on a phone-sized screen and signs in. */
async function signIn(browser: Browser, url: string, token: string) {
  const page = await browser.newPage();
  await page.setViewport({ width: 390, height: 844, deviceScaleFactor: 1 });
  await page.goto(url, { waitUntil: "load" });
  await page.waitForSelector("#login:not([hidden])");
  await page.type("#token", token);
  await page.click("#login button[type=submit]");
  return page;
}

/** Starts an `ask` run over the API and keeps reading its stream in the background. */
async function startAskedRun(
  url: string,
  workspace: string,
  more: { flags?: string[]; config?: Record<string, unknown> } = {},
) {
  const response = await postJson(`${url}/v1/runs`, {
    input: { text: "write the file" },
    config: {
      ...fixtureConfig(workspace, ["--permission", ...more.flags ?? []]),
      "permission-decision": "ask",
      ...more.config,
    },
  }, { authorization: `Bearer ${TOKEN}` });
  assert.equal(response.status, 200);
  const messages = readSse(response.body!);
  const first = await messages.next();
  const runId = JSON.parse(first.value!.data).run_id as string;
  const drained = (async () => {
    for await (const _ of messages) { /* keep the stream read */ }
  })();
  return { runId, drained };
}

async function openRunAndAnswer(page: Page, runId: string, button: string) {
  const row = `li.run[data-run-id="${runId}"]`;
  await page.waitForSelector(row);
  await page.click(row);
  await page.waitForSelector(`.permission button.${button}`);
  const card = await page.$eval(".permission", (node) => node.textContent);
  assert.match(card!, /The agent asks: Write file/);
  assert.match(card!, /notes\.txt/);
  await page.click(`.permission button.${button}`);
}

function transcriptText(page: Page): Promise<string> {
  return page.$eval("#transcript", (node) => node.textContent ?? "");
}

Deno.test("console: sign in, watch a run stream, approve its permission request", async () => {
  await withBrowser(async (browser) => {
    await withServe({ args: ARGS }, async (serve, dir) => {
      const page = await signIn(browser, serve.url, TOKEN);
      await page.waitForSelector("#app:not([hidden])");
      assert.match(await page.$eval("#version", (n) => n.textContent!), /^v\d/);
      const run = await startAskedRun(serve.url, join(dir, "ws"));
      await openRunAndAnswer(page, run.runId, "approve");
      await page.waitForFunction(
        'document.getElementById("run-status").textContent === "completed"',
      );
      const text = await transcriptText(page);
      assert.match(text, /permission: allow_once\necho: write the file/);
      assert.match(text, /Decided: allow_once \(by caller\)/);
      await run.drained;
      // The run had no conversation, so no agent is kept warm.
      assert.equal(
        await page.$eval(
          "#agents-empty",
          (n) => (n as { hidden: boolean }).hidden,
        ),
        false,
      );
      const screenshot = Deno.env.get("RUNNER_CONSOLE_SCREENSHOT") ??
        join(dir, "console.png");
      await page.screenshot({ path: screenshot, fullPage: true });
      const png = await Deno.readFile(screenshot);
      assert.deepEqual([...png.subarray(1, 4)], [0x50, 0x4e, 0x47]);
    });
  });
});

Deno.test("console: rejecting from the page reaches the agent; the run's model and mode are shown", async () => {
  await withBrowser(async (browser) => {
    await withServe({ args: ARGS }, async (serve, dir) => {
      const page = await signIn(browser, serve.url, TOKEN);
      await page.waitForSelector("#app:not([hidden])");
      const run = await startAskedRun(serve.url, join(dir, "ws"), {
        flags: ["--session-config", "both"],
        config: { mode: "plan" },
      });
      await openRunAndAnswer(page, run.runId, "reject");
      await page.waitForFunction(
        'document.getElementById("run-status").textContent === "completed"',
      );
      assert.match(await transcriptText(page), /permission: reject_once/);
      // The run's model and mode, from its session.configured event.
      assert.match(
        await transcriptText(page),
        /\[session\] model smart · mode plan/,
      );
      await run.drained;
    });
  });
});

Deno.test("console: without the token nothing is shown and the API refuses", async () => {
  await withBrowser(async (browser) => {
    await withServe({ args: ARGS }, async (serve, dir) => {
      const run = await startAskedRun(serve.url, join(dir, "ws"));
      const page = await signIn(browser, serve.url, "wrong-token");
      await page.waitForFunction(
        'document.getElementById("login-message").textContent === "This runner needs its API token."',
      );
      assert.equal(await page.$eval("#app", (n) => n.hidden), true);
      assert.equal(await page.$$eval("li.run", (nodes) => nodes.length), 0);
      const status = await page.evaluate(async () =>
        (await fetch("/v1/runs")).status
      );
      assert.equal(status, 401);
      const cancel = await postJson(
        `${serve.url}/v1/runs/${run.runId}/cancel`,
        {},
        { authorization: `Bearer ${TOKEN}` },
      );
      await cancel.body?.cancel();
      await run.drained;
    });
  });
});
