/**
 * The console's live stream over a real network path: a loopback TCP proxy
 * between headless Chromium and `runner serve` cuts the page's connections
 * mid-run (the page reads the rest from the last event it showed, and the
 * badge ends right) or holds what the server sends while a permission
 * request times out (the options are disabled once the time is up).
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import {
  agentCommand,
  gateIn,
  openGate,
  withServe,
} from "../serve_test_helpers.ts";
import {
  assertQuiet,
  CONSOLE_ARGS,
  signIn,
  startRunFromPage,
  transcriptText,
  waitStatus,
  withBrowser,
} from "../console_helpers.ts";
import { startTcpProxy } from "../tcp_proxy_helpers.ts";

Deno.test("console: a live stream cut mid-run is read again from its last event; the rest arrives once and the badge ends completed", async () => {
  await withBrowser(async (browser) => {
    await withServe({ args: CONSOLE_ARGS }, async (serve, dir) => {
      const proxy = startTcpProxy(serve.url);
      try {
        const gate = await gateIn(dir);
        const { page, alarms } = await signIn(browser, proxy.url);
        await page.waitForSelector("#app:not([hidden])");
        await startRunFromPage(page, {
          prompt: "stream through a proxy",
          workspace: join(dir, "ws"),
          config: {
            "acp-command": agentCommand([
              "--text-parts",
              JSON.stringify(["before the cut, ", "after the cut"]),
              "--gate-fifo",
              gate,
              "--gate-chunks",
            ]),
          },
        });
        await waitStatus(page, "active");
        await page.waitForFunction(
          `document.querySelector(".bubble.agent")?.textContent.includes("before the cut")`,
        );
        const before = proxy.accepted();
        proxy.cut();
        // The agent goes on only now: the rest of the run happens after the cut.
        await openGate(gate);
        await waitStatus(page, "completed");
        assert.ok(proxy.accepted() > before, "the page connected again");
        const answers = await page.$$eval(
          ".bubble.agent .markdown",
          (nodes) => nodes.map((n) => n.textContent!.trim()),
        );
        assert.deepEqual(answers, ["before the cut, after the cut"]);
        const text = await transcriptText(page);
        assert.equal(text.match(/stream through a proxy/g)?.length, 1);
        assert.equal(
          await page.$eval("#run-stream", (n) => n.textContent),
          "",
        );
        assertQuiet(alarms);
      } finally {
        await proxy.close();
      }
    });
  });
});

Deno.test("console: once a permission request's time is up its options are disabled, and the fallback's decision shows", async () => {
  await withBrowser(async (browser) => {
    await withServe({ args: CONSOLE_ARGS }, async (serve, dir) => {
      const proxy = startTcpProxy(serve.url);
      try {
        const { page, alarms } = await signIn(browser, proxy.url);
        await page.waitForSelector("#app:not([hidden])");
        await startRunFromPage(page, {
          prompt: "ask and wait",
          workspace: join(dir, "ws"),
          permission: "ask",
          config: {
            "acp-command": agentCommand(["--permission"]),
            // Long enough for the card to show before the proxy holds.
            "permission-timeout": 8,
          },
        });
        await page.waitForSelector(".permission .countdown");
        // Nothing from the server reaches the page now, so the card stays
        // undecided on the page while its time runs out.
        proxy.hold();
        await page.waitForFunction(
          `document.querySelector(".permission .countdown")?.textContent === "timing out…"`,
        );
        const disabled = await page.$$eval(
          ".permission button.option",
          (nodes) => nodes.map((n) => n.hasAttribute("disabled")),
        );
        assert.ok(disabled.length > 0);
        assert.deepEqual(disabled, disabled.map(() => true));
        proxy.release();
        await page.waitForSelector(".permission.decided");
        assert.match(
          await page.$eval(".permission .decision", (n) => n.textContent!),
          /by timeout/,
        );
        await waitStatus(page, "completed");
        assert.match(await transcriptText(page), /permission: reject_once/);
        assertQuiet(alarms);
      } finally {
        await proxy.close();
      }
    });
  });
});
