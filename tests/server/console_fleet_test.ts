/**
 * The console on a two-replica fleet (one PostgreSQL database), in headless
 * Chromium: the page served by replica B lists the warm agent and the
 * daemon replica A keeps, each with replica A, and Stop from B ends A's
 * agent.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import type { Page } from "puppeteer-core";
import { agentPids, isAlive, tempDir } from "../helpers.ts";
import {
  DAEMON_TOKEN,
  daemonProcess,
  daemonTokenFile,
  hubUrlOf,
} from "../daemon_test_helpers.ts";
import { clusterForThisFile, pgTest } from "../pg_helpers.ts";
import { withTwoReplicas } from "../fleet_helpers.ts";
import {
  assertQuiet,
  CONSOLE_ARGS,
  signIn,
  warmRun,
  withBrowser,
} from "../console_helpers.ts";

const cluster = clusterForThisFile();
const ARGS = [
  ...CONSOLE_ARGS,
  "--daemon-enabled",
  "--daemon-port",
  "0",
  "--daemon-token",
  DAEMON_TOKEN,
];

/** The text of the row `selector` once it includes `part`. */
async function rowWith(
  page: Page,
  selector: string,
  part: string,
): Promise<string> {
  const handle = await page.waitForFunction(
    `(() => { const row = document.querySelector(${JSON.stringify(selector)});
      return row && row.textContent.includes(${
      JSON.stringify(part)
    }) ? row.textContent : false; })()`,
  );
  return await handle.jsonValue() as string;
}

pgTest(
  "console: the page replica B serves lists replica A's warm agent and daemon, and stops A's agent",
  async () => {
    const url = await cluster().newDatabase();
    await withTwoReplicas(url, async (a, b) => {
      const daemon = daemonProcess(
        await hubUrlOf(a),
        "desk",
        daemonTokenFile(),
      );
      try {
        await daemon.connected;
        const pidFile = join(tempDir(), "pids.json");
        await warmRun(a.url, "fleet-chat", pidFile);
        await withBrowser(async (browser) => {
          const { page, alarms } = await signIn(browser, b.url);
          await page.waitForSelector("#app:not([hidden])");
          const agent = await rowWith(
            page,
            "#agents li[data-agent-id]",
            "fleet-chat",
          );
          assert.match(agent, /^customlocal · fleet-chat · replica a · idle/);
          const desk = await rowWith(
            page,
            'li.daemon[data-daemon-id="desk"]',
            "replica",
          );
          assert.match(desk, /^deskconnectedreplica a · no active job/);
          const pids = agentPids(pidFile);
          assert.ok(pids.every(isAlive), "A keeps the agent warm");
          const stopped = page.waitForResponse((response) =>
            response.request().method() === "DELETE" &&
            response.url().includes("/v1/agents/")
          );
          await page.click("#agents li[data-agent-id] button");
          const answer = await stopped;
          assert.equal(answer.status(), 200);
          assert.equal(answer.headers()["x-runner-replica"], "a");
          assert.deepEqual(pids.filter(isAlive), [], "Stop from B ended it");
          assertQuiet(alarms);
        });
      } finally {
        await daemon.stop();
      }
    }, ARGS);
  },
);
