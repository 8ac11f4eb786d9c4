/**
 * The operator console in a real headless Chromium against a real
 * `runner serve` with an API token: sign in, see a run started by another
 * client appear and stream, answer its permission request from the page,
 * page and filter the runs list, and no access without the right token.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import type { Page } from "puppeteer-core";
import {
  agentCommand,
  fixtureConfig,
  postJson,
  readSse,
  withServe,
} from "../serve_test_helpers.ts";
import {
  assertQuiet,
  CONSOLE_ARGS,
  cspRefusal,
  openPage,
  signIn,
  TOKEN,
  transcriptText,
  waitStatus,
  watchPage,
  withBrowser,
  withOpenConsole,
} from "../console_helpers.ts";

const AUTH = { authorization: `Bearer ${TOKEN}` };

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
  }, AUTH);
  assert.equal(response.status, 200);
  const messages = readSse(response.body!);
  const first = await messages.next();
  const runId = JSON.parse(first.value!.data).run_id as string;
  const drained = (async () => {
    for await (const _ of messages) { /* keep the stream read */ }
  })();
  return { runId, drained };
}

async function openRunAndAnswer(page: Page, runId: string, option: string) {
  const row = `li.run[data-run-id="${runId}"]`;
  await page.waitForSelector(row);
  await page.click(row);
  const button = `.permission button[data-option-id="${option}"]`;
  await page.waitForSelector(button);
  const card = await page.$eval(".permission", (node) => node.textContent);
  assert.match(card!, /The agent asks: Write file/);
  assert.match(card!, /notes\.txt/);
  await page.click(button);
}

Deno.test("console: sign in, watch a run of another client stream, approve its permission request", async () => {
  await withOpenConsole(async ({ serve, dir, page, alarms }) => {
    assert.match(await page.$eval("#version", (n) => n.textContent!), /^v\d/);
    assert.equal(
      await page.$eval("#sign-out", (n) => n.hasAttribute("hidden")),
      false,
    );
    const run = await startAskedRun(serve.url, join(dir, "ws"));
    await openRunAndAnswer(page, run.runId, "allow_once");
    await waitStatus(page, "completed");
    const text = await transcriptText(page);
    assert.match(text, /permission: allow_once\s+echo: write the file/);
    assert.match(text, /Decided: allow_once \(allow_once\) by caller/);
    // The prompt of a run another client started comes from the runner.
    assert.equal(
      await page.$eval(".bubble.user .text", (n) => n.textContent),
      "write the file",
    );
    assert.equal(
      await page.$eval(
        `li.run[data-run-id="${run.runId}"] .snippet`,
        (n) => n.textContent,
      ),
      "write the file",
    );
    await run.drained;
    assert.equal(
      await page.$eval("#agents-empty", (n) => n.hasAttribute("hidden")),
      false,
    );
    assertQuiet(alarms);
  });
});

Deno.test("console: rejecting from the page reaches the agent; the run's model and mode are shown", async () => {
  await withOpenConsole(async ({ serve, dir, page, alarms }) => {
    const run = await startAskedRun(serve.url, join(dir, "ws"), {
      flags: ["--session-config", "both"],
      config: { mode: "plan" },
    });
    await openRunAndAnswer(page, run.runId, "reject_once");
    await waitStatus(page, "completed");
    assert.match(await transcriptText(page), /permission: reject_once/);
    // The run's model and mode, from its session.configured event.
    assert.match(
      await transcriptText(page),
      /\[session\] model smart · mode plan/,
    );
    // The runs list names the mode the run asked for.
    const row = await page.waitForSelector(
      `li.run[data-run-id="${run.runId}"] .session`,
    );
    assert.equal(
      await row!.evaluate((node) => node.textContent),
      "mode plan",
    );
    await run.drained;
    assertQuiet(alarms);
  });
});

Deno.test("console: a failed answer shows its error and a Retry that answers again", async () => {
  await withOpenConsole(async ({ serve, dir, page, alarms }) => {
    // The first answer never reaches the runner: the browser drops it.
    let dropped = 0;
    await page.setRequestInterception(true);
    page.on("request", (request) => {
      if (request.url().includes("/permissions/") && dropped++ === 0) {
        request.abort("connectionreset").catch(() => {});
      } else request.continue().catch(() => {});
    });
    const run = await startAskedRun(serve.url, join(dir, "ws"));
    await openRunAndAnswer(page, run.runId, "allow_once");
    await page.waitForSelector(".permission .answer-error button.retry");
    assert.match(
      await page.$eval(".permission .answer-error", (n) => n.textContent!),
      /did not reach the runner/,
    );
    assert.equal(
      await page.$eval(
        '.permission button[data-option-id="allow_once"]',
        (n) => n.hasAttribute("disabled"),
      ),
      true,
    );
    await page.click(".permission .answer-error button.retry");
    await page.click('.permission button[data-option-id="allow_once"]');
    await waitStatus(page, "completed");
    assert.match(await transcriptText(page), /permission: allow_once/);
    await run.drained;
    assertQuiet(alarms);
  });
});

Deno.test("console: the runs list filters and pages on the server", async () => {
  await withBrowser(async (browser) => {
    await withServe({ args: CONSOLE_ARGS }, async (serve, dir) => {
      const ids: string[] = [];
      for (let i = 0; i < 22; i++) {
        const response = await postJson(`${serve.url}/v1/runs`, {
          run_id: `page-run-${String(i).padStart(2, "0")}`,
          conversation_id: i === 3 ? "the-odd-one" : "bulk",
          input: { text: `run ${i}` },
          config: {
            provider: "custom",
            workspace: join(dir, "ws"),
            "acp-command": agentCommand(i === 5 ? ["--fail-prompt"] : []),
          },
          stream: false,
        }, AUTH);
        assert.equal(response.status, 200);
        ids.push(((await response.json()) as { run_id: string }).run_id);
      }
      const { page, alarms } = await signIn(browser, serve.url, {
        viewport: { width: 1280, height: 900, deviceScaleFactor: 1 },
      });
      await page.waitForSelector("#app:not([hidden])");
      const listed = () =>
        page.$$eval(
          "li.run[data-run-id]",
          (nodes) => nodes.map((n) => n.getAttribute("data-run-id")),
        );
      await page.waitForSelector(`li.run[data-run-id="${ids[21]}"]`);
      assert.deepEqual(await listed(), ids.slice(2).reverse());
      await page.click("#runs-older");
      await page.waitForSelector(`li.run[data-run-id="${ids[0]}"]`);
      assert.deepEqual(await listed(), [ids[1], ids[0]]);
      assert.equal(
        await page.$eval("#runs-older", (n) => n.hasAttribute("disabled")),
        true,
      );
      await page.click("#runs-newer");
      await page.waitForSelector(`li.run[data-run-id="${ids[21]}"]`);
      await page.type("#filter-conversation", "the-odd-one");
      await page.click("#filters button[type=submit]");
      await page.waitForFunction(
        `document.querySelectorAll("li.run[data-run-id]").length === 1`,
      );
      assert.deepEqual(await listed(), [ids[3]]);
      await page.$eval(
        "#filter-conversation",
        (n) => (n as unknown as { value: string }).value = "",
      );
      await page.select("#filter-status", "failed");
      await page.click("#filters button[type=submit]");
      await page.waitForSelector(`li.run[data-run-id="${ids[5]}"]`);
      await page.waitForFunction(
        `document.querySelectorAll("li.run[data-run-id]").length === 1`,
      );
      assertQuiet(alarms);
    });
  });
});

Deno.test("console: a wrong token and no token get their own messages; favicon and libraries are served", async () => {
  await withBrowser(async (browser) => {
    await withServe({ args: CONSOLE_ARGS }, async (serve) => {
      const { page, alarms } = await signIn(browser, serve.url, {
        token: "wrong-token",
      });
      await page.waitForFunction(
        `document.getElementById("login-message").textContent.startsWith("The runner refused this token")`,
      );
      assert.equal(
        await page.$eval("#app", (n) => n.hasAttribute("hidden")),
        true,
      );
      assert.equal(
        await page.$eval("#sign-out", (n) => n.hasAttribute("hidden")),
        true,
      );
      assert.equal(await page.$$eval("li.run", (nodes) => nodes.length), 0);
      const fresh = await openPage(browser);
      const freshAlarms = await watchPage(fresh);
      await fresh.goto(serve.url, { waitUntil: "load" });
      await fresh.waitForFunction(
        `document.getElementById("login-message").textContent === "This runner needs its API token."`,
      );
      assert.equal(
        await fresh.$eval("#sign-out", (n) => n.hasAttribute("hidden")),
        true,
      );
      const status = await fresh.evaluate(async () =>
        (await fetch("/v1/runs")).status
      );
      assert.equal(status, 401);
      const icon = await fetch(`${serve.url}/favicon.ico`);
      assert.equal(icon.status, 200);
      assert.match(icon.headers.get("content-type")!, /^image\//);
      await icon.body?.cancel();
      for (const path of ["/console/marked.js", "/console/purify.js"]) {
        const lib = await fetch(serve.url + path);
        assert.equal(lib.status, 200);
        assert.match(lib.headers.get("content-type")!, /javascript/);
        assert.match(await lib.text(), /export\s*\{/);
      }
      assertQuiet(alarms);
      assertQuiet(freshAlarms);
    });
  });
});

Deno.test("console: the quiet check fails on an inline script or style the CSP refuses", async () => {
  await withOpenConsole(async ({ page, alarms }) => {
    assertQuiet(alarms);
    await page.evaluate(`(() => {
        const script = document.createElement("script");
        script.textContent = "document.title = 'ran'";
        document.body.append(script);
        const style = document.createElement("style");
        style.textContent = "body{color:red}";
        document.head.append(style);
      })()`);
    await cspRefusal(alarms, /script-src/);
    await cspRefusal(alarms, /style-src/);
    assert.equal(await page.title(), "runner console");
    assert.throws(() => assertQuiet(alarms), /the page broke its CSP/);
  });
});
