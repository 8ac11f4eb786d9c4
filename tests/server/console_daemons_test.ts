/**
 * Daemons and warm agents in the console, in headless Chromium, against a
 * real `runner serve` with its hub and a real `runner daemon`: the daemon's
 * row shows its jobs in flight and when it last sent a frame, the daemon
 * filter lists its runs, a warm agent's row shows its conversation and Stop
 * ends its process, and a fenced daemon is unfenced from its row.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import type { Page } from "puppeteer-core";
import type { RunEvent } from "../../lib/events.ts";
import { FenceStore } from "../../lib/hub/fences.ts";
import { agentPids, fixtureCommand, isAlive, tempDir } from "../helpers.ts";
import {
  daemonProcess,
  daemonTokenFile,
  serveWithHub,
} from "../daemon_test_helpers.ts";
import { postJson, readSse, readUntil } from "../serve_test_helpers.ts";
import {
  assertQuiet,
  CONSOLE_ARGS,
  signIn,
  TOKEN,
  warmRun,
  withBrowser,
} from "../console_helpers.ts";

const AUTH = { authorization: `Bearer ${TOKEN}` };

/** The text of the row `selector` once `test` holds for it. */
async function rowText(
  page: Page,
  selector: string,
  test: string,
): Promise<string> {
  const handle = await page.waitForFunction(
    `(() => { const row = document.querySelector(${JSON.stringify(selector)});
      const text = row ? row.textContent : null;
      return text !== null && (${test}) ? text : false; })()`,
  );
  return await handle.jsonValue() as string;
}

/** A run on daemon `desk` held at its permission request; cancelled by `end()`. */
async function heldDaemonRun(url: string) {
  const response = await postJson(`${url}/v1/runs`, {
    input: { text: "write it" },
    config: {
      provider: "custom",
      location: "daemon",
      "daemon-id": "desk",
      workspace: tempDir(),
      "permission-decision": "ask",
      "acp-command": fixtureCommand("--permission"),
    },
  }, AUTH);
  assert.equal(response.status, 200);
  const stream = readSse(response.body!);
  const seen: RunEvent[] = [];
  await readUntil(stream, seen, (m) => m.event === "permission.requested");
  const runId = seen[0].run_id;
  return {
    runId,
    async end() {
      const cancel = await postJson(
        `${url}/v1/runs/${runId}/cancel`,
        {},
        AUTH,
      );
      assert.ok(cancel.ok, `cancel answered ${cancel.status}`);
      await cancel.body?.cancel();
      for await (const _ of stream) { /* until the run's end */ }
    },
  };
}

async function checkDaemonRow(page: Page, url: string) {
  const held = await heldDaemonRun(url);
  const listed = await (await fetch(`${url}/v1/daemons`, { headers: AUTH }))
    .json();
  const jobs = listed.daemons.find((d: { daemon_id: string }) =>
    d.daemon_id === "desk"
  ).active_jobs as string[];
  assert.equal(jobs.length, 1);
  const busy = await rowText(
    page,
    'li.daemon[data-daemon-id="desk"]',
    `text.includes("active jobs: ")`,
  );
  assert.match(busy, /^deskconnected/);
  assert.ok(busy.includes(`active jobs: ${jobs[0]}`), busy);
  assert.match(busy, /last seen \d/);
  // The daemon filter lists the run held there, and only it.
  await page.type("#filter-daemon", "desk");
  await page.click("#filters button[type=submit]");
  await page.waitForFunction(
    `[...document.querySelectorAll("li.run[data-run-id]")].map((n) => n.dataset.runId).join() === ${
      JSON.stringify(held.runId)
    }`,
  );
  await held.end();
  await rowText(
    page,
    'li.daemon[data-daemon-id="desk"]',
    `text.includes("no active job")`,
  );
}

async function checkWarmAgent(page: Page, url: string, pidFile: string) {
  await warmRun(url, "warm-chat", pidFile);
  const row = "#agents li[data-agent-id]";
  const text = await rowText(page, row, `text.includes("warm-chat")`);
  assert.match(text, /^customlocal · warm-chat · idle since \d/);
  const pids = agentPids(pidFile);
  assert.ok(pids.every(isAlive), "the warm agent runs");
  const stopped = page.waitForResponse((response) =>
    response.request().method() === "DELETE" &&
    response.url().includes("/v1/agents/")
  );
  await page.click(`${row} button`);
  assert.equal((await stopped).status(), 200);
  // DELETE /v1/agents/{id} answers once the agent's processes are gone.
  assert.deepEqual(pids.filter(isAlive), [], "Stop ended the warm agent");
  await page.waitForFunction(
    `document.querySelectorAll(${JSON.stringify(row)}).length === 0`,
  );
}

async function checkUnfence(page: Page) {
  const row = 'li.daemon[data-daemon-id="old-box"]';
  const text = await rowText(page, row, `text.includes("fenced")`);
  assert.equal(text, "old-boxfencedoffline · no active jobUnfence");
  await page.click(`${row} button`);
  await page.waitForFunction(`!document.querySelector(${JSON.stringify(row)})`);
}

Deno.test("console: a connected daemon's jobs and last frame, the daemon filter, a warm agent stopped from its row, a fenced daemon unfenced", async () => {
  const dataDir = tempDir();
  // A fence left by an earlier hub on this data dir.
  await new FenceStore(join(dataDir, "relay")).ensureMarker("old-box");
  const { serve, hubUrl } = await serveWithHub({
    dataDir,
    serveArgs: CONSOLE_ARGS,
  });
  const daemon = daemonProcess(hubUrl, "desk", daemonTokenFile());
  try {
    await daemon.connected;
    await withBrowser(async (browser) => {
      const { page, alarms } = await signIn(browser, serve.url, {
        accept: /^Unfence old-box\?/,
      });
      await page.waitForSelector("#app:not([hidden])");
      await checkDaemonRow(page, serve.url);
      await checkWarmAgent(page, serve.url, join(tempDir(), "pids.json"));
      await checkUnfence(page);
      assertQuiet(alarms);
    });
  } finally {
    await daemon.stop();
    await serve.stop();
  }
});
