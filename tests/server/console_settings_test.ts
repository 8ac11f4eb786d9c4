/**
 * Run settings in the console, in headless Chromium against a real
 * `runner serve`: the New run form lists the keys this server takes from a
 * caller and shows the policy's refusal, takes a model and a mode, a new run
 * of the idle conversation keeps the run's settings, and a warm agent's Stop
 * that fails says why (and cannot be sent twice at once).
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import type { HTTPRequest, Page } from "puppeteer-core";
import { agentCommand } from "../serve_test_helpers.ts";
import {
  assertQuiet,
  DESKTOP,
  fillNewRun,
  STORE_UNAVAILABLE,
  TOKEN,
  transcriptText,
  waitNewRun,
  waitStatus,
  withOpenConsole,
} from "../console_helpers.ts";

const AUTH = { authorization: `Bearer ${TOKEN}` };

function setValue(page: Page, id: string, value: string) {
  return page.$eval(
    `#${id}`,
    (n, v) => (n as unknown as { value: string }).value = v,
    value,
  );
}

Deno.test("console: the form lists the caller's keys and shows a refusal; a new run of the idle conversation keeps the run's settings", async () => {
  await withOpenConsole(async ({ serve, dir, page, alarms }) => {
    const command = agentCommand(["--session-config", "both"]);
    await fillNewRun(page, {
      prompt: "settings",
      conversation: "carry",
      workspace: join(dir, "ws"),
      config: { "acp-command": command, "secret-env-names": "X" },
    });
    const keys = await page.$eval("#new-keys-list", (n) => n.textContent!);
    assert.match(keys, /\bpermission-timeout\b/);
    assert.match(keys, /\bacp-command\b/); // --allow-custom-commands
    assert.doesNotMatch(keys, /secret-env-names/);
    await page.click("#new-run-submit");
    await page.waitForFunction(
      `document.getElementById("new-error").textContent.includes("secret-env-names can only be set by the operator")`,
    );
    assert.match(
      await page.$eval("#new-error", (n) => n.textContent!),
      /^http\.forbidden: /,
    );
    await setValue(
      page,
      "new-config",
      JSON.stringify({ "acp-command": command, "permission-timeout": 300 }),
    );
    await page.type("#new-mode", "plan");
    await page.click("#new-run-submit");
    await waitNewRun(page, "");
    await waitStatus(page, "completed");
    const first = await page.$eval("#run-title", (n) => n.textContent!);
    assert.match(
      await transcriptText(page),
      /\[session\] model smart · mode plan/,
    );
    const carried = await page.$$eval(
      "#follow-up-carried li",
      (nodes) => nodes.map((n) => n.textContent!),
    );
    assert.ok(carried.includes("permission-timeout: 300"), String(carried));
    assert.ok(!carried.some((line) => line.startsWith("mode:")));
    await page.type("#follow-up-text", "next");
    await page.click("#follow-up-send");
    await waitNewRun(page, first);
    await waitStatus(page, "completed");
    const second = await page.$eval("#run-title", (n) => n.textContent!);
    const record = await (await fetch(`${serve.url}/v1/runs/${second}`, {
      headers: AUTH,
    })).json() as { config: Record<string, unknown> };
    assert.equal(record.config["permission-timeout"], 300);
    assert.equal(record.config["acp-command"], command);
    // The conversation remembers the mode itself.
    assert.match(await transcriptText(page), /mode plan/);
    assertQuiet(alarms);
  }, { viewport: DESKTOP });
});

Deno.test("console: a warm agent's Stop is sent once while under way, and a failed one says why", async () => {
  await withOpenConsole(async ({ dir, page, alarms }) => {
    await fillNewRun(page, {
      prompt: "stay warm",
      conversation: "warm",
      workspace: join(dir, "ws"),
      config: { "acp-command": agentCommand([]) },
    });
    await page.click("#new-run-submit");
    await waitNewRun(page, "");
    await waitStatus(page, "completed");
    const stop = "#agents li[data-agent-id] button.stop";
    await page.waitForSelector(stop);
    const deletes: HTTPRequest[] = [];
    const arrived = Promise.withResolvers<void>();
    await page.setRequestInterception(true);
    page.on("request", (request) => {
      if (request.method() !== "DELETE") {
        request.continue().catch(() => {});
        return;
      }
      deletes.push(request);
      if (deletes.length === 1) arrived.resolve();
      else request.continue().catch(() => {});
    });
    await page.click(stop);
    await arrived.promise;
    await page.waitForSelector(`${stop}[disabled]`);
    await page.click(stop);
    assert.equal(deletes.length, 1);
    await deletes[0].respond(STORE_UNAVAILABLE);
    await page.waitForFunction(
      `document.querySelector("#agents li[data-agent-id] .row-error")?.textContent === "store.unavailable: The store did not answer."`,
    );
    await page.waitForSelector(`${stop}:not([disabled])`);
    await page.click(stop);
    await page.waitForSelector("#agents-empty:not([hidden])");
    assert.equal(deletes.length, 2);
    assertQuiet(alarms);
  }, { viewport: DESKTOP });
});
