/**
 * The console opened from the URL a default `runner serve` prints
 * (`http://127.0.0.1:<port>/#token=…`, no `--api-token`): it signs in with
 * the token from the fragment, keeps it in the tab, and takes it out of the
 * address bar; the server never saw it in a request.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import {
  assertStatus,
  fixtureConfig,
  postJson,
  withServe,
} from "../serve_test_helpers.ts";
import {
  assertQuiet,
  openPage,
  watchPage,
  withBrowser,
} from "../console_helpers.ts";

Deno.test("console: opened from the printed URL, it signs in with the fragment's token, keeps it in the tab and takes it out of the address bar", async () => {
  await withBrowser(async (browser) => {
    await withServe(
      { args: ["--allow-custom-commands"] },
      async (serve, dir) => {
        const token = serve.token!;
        assert.equal(serve.consoleUrl, `${serve.url}/#token=${token}`);
        const started = await postJson(`${serve.url}/v1/runs`, {
          run_id: "from-api",
          input: { text: "hello" },
          config: fixtureConfig(join(dir, "ws")),
          stream: false,
        });
        await assertStatus(started, 200);

        const page = await openPage(browser);
        const alarms = await watchPage(page);
        await page.goto(serve.consoleUrl, { waitUntil: "load" });
        await page.waitForSelector("#app:not([hidden])");
        await page.waitForSelector('li.run[data-run-id="from-api"]');
        assert.equal(
          await page.$eval("#login", (n) => n.hasAttribute("hidden")),
          true,
        );
        assert.ok(!page.url().includes(token), `address bar: ${page.url()}`);
        assert.doesNotMatch(page.url(), /token=/);
        assert.equal(
          await page.evaluate(`sessionStorage.getItem("runner-token")`),
          token,
        );
        // A reload stays signed in from the tab's storage.
        await page.reload({ waitUntil: "load" });
        await page.waitForSelector("#app:not([hidden])");
        assert.ok(!page.url().includes(token));
        assertQuiet(alarms);

        // A fresh tab without the fragment must sign in.
        const fresh = await openPage(browser);
        await fresh.goto(serve.url, { waitUntil: "load" });
        await fresh.waitForSelector("#login:not([hidden])");

        // The fragment never reached the server: only the console line has the token.
        const outsideConsoleLine = serve.logs().split("\n").filter((line) =>
          !line.startsWith("console: ")
        ).join("\n");
        assert.ok(!outsideConsoleLine.includes(token), "the access log");
      },
    );
  });
});
