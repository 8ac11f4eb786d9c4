/**
 * The console when things go wrong or an operator is quick, in headless
 * Chromium against a real `runner serve`: switching runs while one still
 * loads, double clicks on Start run and on a follow-up, a run or its events
 * that cannot be read, a side request that fails, and the list's polling
 * across sign-ins and a hidden tab.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import type { HTTPRequest, Page } from "puppeteer-core";
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
  fillNewRun,
  openPage,
  signIn,
  STORE_UNAVAILABLE,
  TOKEN,
  transcriptText,
  waitNewRun,
  waitStatus,
  withBrowser,
  withOpenConsole,
} from "../console_helpers.ts";

const AUTH = { authorization: `Bearer ${TOKEN}` };

/** Starts a run that waits for a permission answer, its stream read in the background. */
async function waitingRun(
  url: string,
  workspace: string,
  conversation: string,
) {
  const response = await postJson(`${url}/v1/runs`, {
    conversation_id: conversation,
    input: { text: `run of ${conversation}` },
    config: {
      ...fixtureConfig(workspace, ["--permission"]),
      "permission-decision": "ask",
    },
  }, AUTH);
  assert.equal(response.status, 200);
  const messages = readSse(response.body!);
  const runId = JSON.parse((await messages.next()).value!.data).run_id;
  const drained = (async () => {
    for await (const _ of messages) { /* keep the stream read */ }
  })();
  return { runId: runId as string, drained };
}

async function listRuns(url: string, query: string): Promise<string[]> {
  const response = await fetch(`${url}/v1/runs?${query}`, { headers: AUTH });
  const body = await response.json() as { runs: { run_id: string }[] };
  return body.runs.map((run) => run.run_id);
}

/** Cancels each run (so its agent ends). */
async function cancelAll(url: string, runIds: string[]): Promise<void> {
  for (const runId of runIds) {
    const response = await postJson(`${url}/v1/runs/${runId}/cancel`, {}, AUTH);
    await response.body?.cancel();
  }
}

Deno.test("console: opening another run while the first still loads shows only the newer one", async () => {
  await withBrowser(async (browser) => {
    await withServe({ args: CONSOLE_ARGS }, async (serve, dir) => {
      const a = await waitingRun(serve.url, join(dir, "ws"), "c-run-a");
      const b = await waitingRun(serve.url, join(dir, "ws"), "c-run-b");
      const { page, alarms } = await signIn(browser, serve.url);
      await page.waitForSelector(`li.run[data-run-id="${b.runId}"]`);
      // The record of run A is held back until run B is open.
      const record = `/v1/runs/${a.runId}?`;
      const seen: string[] = [];
      let held: HTTPRequest | undefined;
      const heldArrived = Promise.withResolvers<void>();
      const settled = Promise.withResolvers<void>();
      page.on("requestfinished", (r) => {
        if (r.url().includes(record)) settled.resolve();
      });
      page.on("requestfailed", (r) => {
        if (r.url().includes(record)) settled.resolve();
      });
      await page.setRequestInterception(true);
      page.on("request", (request) => {
        seen.push(request.url());
        if (request.url().includes(record) && !held) {
          held = request;
          heldArrived.resolve();
        } else request.continue().catch(() => {});
      });
      await page.click(`li.run[data-run-id="${a.runId}"]`);
      await heldArrived.promise;
      await page.click(`li.run[data-run-id="${b.runId}"]`);
      await page.waitForSelector(".permission:not(.decided) button.option");
      held!.continue().catch(() => {});
      await settled.promise;
      // A whole poll of the list later, anything run A's late answer did has happened.
      await page.waitForResponse((r) => r.url().includes("/v1/runs?"));
      assert.equal(
        seen.filter((u) => u.includes(`/v1/runs/${a.runId}/events`)).length,
        0,
        "run A's events were read into run B's panel",
      );
      assert.equal(
        await page.$eval("#run-title", (n) => n.textContent),
        b.runId,
      );
      assert.match(
        await page.$eval("#run-meta", (n) => n.textContent!),
        /conversation c-run-b/,
      );
      assert.equal(await page.$$eval(".permission", (n) => n.length), 1);
      assert.doesNotMatch(await transcriptText(page), /c-run-a/);
      await page.setRequestInterception(false);
      await cancelAll(serve.url, [a.runId, b.runId]);
      await Promise.all([a.drained, b.drained]);
      assertQuiet(alarms);
    });
  });
});

/**
 * Double-clicks `selector` while the page's run starts (`POST /v1/runs`) are
 * held, so that both clicks land before the first start is answered (on a
 * loaded machine an unheld answer can come between them and change the page
 * under the second click).
 */
async function doubleClickWhileStarting(
  page: Page,
  selector: string,
): Promise<void> {
  const held: HTTPRequest[] = [];
  const firstHeld = Promise.withResolvers<void>();
  const onRequest = (request: HTTPRequest) => {
    if (
      request.method() === "POST" &&
      new URL(request.url()).pathname === "/v1/runs"
    ) {
      held.push(request);
      firstHeld.resolve();
    } else request.continue().catch(() => {});
  };
  await page.setRequestInterception(true);
  page.on("request", onRequest);
  await page.click(selector, { count: 2 });
  await firstHeld.promise;
  await Promise.all(held.map((request) => request.continue()));
  await page.setRequestInterception(false);
  page.off("request", onRequest);
}

Deno.test("console: a double click on Start run starts one run, and on a follow-up one more", async () => {
  await withOpenConsole(async ({ serve, dir, page, alarms }) => {
    await fillNewRun(page, {
      prompt: "hello",
      conversation: "twice",
      workspace: join(dir, "ws"),
      config: { "acp-command": agentCommand([]) },
    });
    await doubleClickWhileStarting(page, "#new-run-submit");
    await waitNewRun(page, "");
    await waitStatus(page, "completed");
    const first = await page.$eval("#run-title", (n) => n.textContent!);
    assert.deepEqual(await listRuns(serve.url, "conversation_id=twice"), [
      first,
    ]);
    const once = await transcriptText(page);
    assert.equal(once.match(/echo: hello/g)?.length, 1, once);
    assert.doesNotMatch(once, /turn 2/);
    assert.equal(await page.$$eval(".bubble.user", (n) => n.length), 1);
    // Idle: a follow-up starts a new run of the conversation, once.
    await page.type("#follow-up-text", "again");
    await doubleClickWhileStarting(page, "#follow-up-send");
    await waitNewRun(page, first);
    await waitStatus(page, "completed");
    const second = await page.$eval("#run-title", (n) => n.textContent!);
    assert.deepEqual(await listRuns(serve.url, "conversation_id=twice"), [
      second,
      first,
    ]);
    const again = await transcriptText(page);
    assert.equal(again.match(/echo: again/g)?.length, 1, again);
    // No second turn steered into it: one prompt, no follow-up.
    assert.equal(await page.$$eval(".bubble.user", (n) => n.length), 1);
    assertQuiet(alarms);
  });
});

Deno.test("console: a run that cannot be loaded, or whose events cannot be read, says so in its panel", async () => {
  await withBrowser(async (browser) => {
    await withServe({ args: CONSOLE_ARGS }, async (serve, dir) => {
      const done = await postJson(`${serve.url}/v1/runs`, {
        input: { text: "done" },
        config: fixtureConfig(join(dir, "ws")),
        stream: false,
      }, AUTH);
      const runId = ((await done.json()) as { run_id: string }).run_id;
      const { page, alarms } = await signIn(
        browser,
        `${serve.url}/#run=no-such-run`,
      );
      await page.waitForFunction(
        `document.getElementById("run-error").textContent.startsWith("The run could not be loaded: http.not_found")`,
      );
      assert.equal(
        await page.$eval("#run-title", (n) => n.textContent),
        "no-such-run",
      );
      // The events route answers 404 once (as a replica that lost the run would).
      await page.setRequestInterception(true);
      let refused = 0;
      page.on("request", (request) => {
        if (
          request.url().includes(`/v1/runs/${runId}/events`) && refused++ === 0
        ) {
          request.respond({
            status: 404,
            contentType: "application/json",
            body: JSON.stringify({
              error: {
                code: "http.not_found",
                message: "No such run.",
                retryable: false,
              },
            }),
          }).catch(() => {});
        } else request.continue().catch(() => {});
      });
      const row = `li.run[data-run-id="${runId}"]`;
      await page.waitForSelector(row);
      await page.click(row);
      await page.waitForFunction(
        `document.getElementById("run-error").textContent === "The run's events could not be read: http.not_found: No such run."`,
      );
      // Opening it again reads its events.
      await page.click(row);
      await waitStatus(page, "completed");
      assert.equal(await page.$eval("#run-error", (n) => n.textContent), "");
      assert.match(await transcriptText(page), /echo: done/);
      assertQuiet(alarms);
    });
  });
});

Deno.test("console: a failing side request leaves the page usable, names what failed, and Retry loads it", async () => {
  await withBrowser(async (browser) => {
    await withServe({ args: CONSOLE_ARGS }, async (serve) => {
      const page = await openPage(browser);
      let failing = true;
      await page.setRequestInterception(true);
      page.on("request", (request) => {
        const path = new URL(request.url()).pathname;
        if (failing && path === "/healthz") {
          request.respond({
            status: 503,
            contentType: "application/json",
            body: JSON.stringify({
              status: "unavailable",
              store: { ok: false },
            }),
          }).catch(() => {});
        } else if (failing && path === "/v1/daemons") {
          request.respond(STORE_UNAVAILABLE).catch(() => {});
        } else request.continue().catch(() => {});
      });
      await page.goto(serve.url, { waitUntil: "load" });
      await page.waitForSelector("#login:not([hidden])");
      await page.type("#token", TOKEN);
      await page.click("#login button[type=submit]");
      await page.waitForSelector("#app:not([hidden])");
      await page.waitForSelector("#page-error:not([hidden])");
      const banner = await page.$eval(
        "#page-error-text",
        (n) => n.textContent!,
      );
      assert.match(banner, /\/healthz: HTTP 503 \(the store is unavailable\)/);
      assert.match(
        banner,
        /daemons: store\.unavailable: The store did not answer\./,
      );
      assert.equal(
        await page.$eval("#daemons-error", (n) => n.textContent),
        "store.unavailable: The store did not answer.",
      );
      assert.equal(
        await page.$eval("#runs-empty", (n) => n.hasAttribute("hidden")),
        false,
      );
      failing = false;
      await page.click("#page-retry");
      await page.waitForSelector("#page-error[hidden]");
      assert.equal(
        await page.$eval("#daemons-error", (n) => n.textContent),
        "",
      );
      assert.match(await page.$eval("#version", (n) => n.textContent!), /^v\d/);
      await page.close();
    });
  });
});

// Records the page's polling intervals (the 1.5 s ones) and counts its fetches.
const INSTRUMENT = `(() => {
  const polls = new Map(); window.__polls = polls; window.__fetches = 0;
  const set = window.setInterval.bind(window); const clear = window.clearInterval.bind(window);
  window.setInterval = (fn, ms, ...rest) => { const id = set(fn, ms, ...rest); if (ms === 1500) polls.set(id, fn); return id; };
  window.clearInterval = (id) => { polls.delete(id); clear(id); };
  const fetch = window.fetch.bind(window);
  window.fetch = (...args) => { window.__fetches++; return fetch(...args); };
})();`;

Deno.test("console: one poll at a time: none once signed out, one after signing in again, none while the tab is hidden", async () => {
  await withBrowser(async (browser) => {
    await withServe({ args: CONSOLE_ARGS }, async (serve) => {
      const page = await openPage(browser);
      await page.evaluateOnNewDocument(INSTRUMENT);
      let refuseNext = false;
      await page.setRequestInterception(true);
      page.on("request", (request) => {
        if (refuseNext && request.url().includes("/v1/runs?")) {
          refuseNext = false;
          request.respond({
            status: 401,
            contentType: "application/json",
            body: JSON.stringify({
              error: {
                code: "http.unauthorized",
                message: "Unauthorized.",
                retryable: false,
              },
            }),
          }).catch(() => {});
        } else request.continue().catch(() => {});
      });
      const polls = () => page.evaluate("window.__polls.size");
      const signInAgain = async () => {
        await page.waitForSelector("#login:not([hidden])");
        await page.$eval(
          "#token",
          (n) => (n as unknown as { value: string }).value = "",
        );
        await page.type("#token", TOKEN);
        await page.click("#login button[type=submit]");
        await page.waitForSelector("#app:not([hidden])");
      };
      await page.goto(serve.url, { waitUntil: "load" });
      await signInAgain();
      assert.equal(await polls(), 1);
      for (let round = 0; round < 2; round++) {
        // The runner refuses the token: the page signs out and stops polling.
        refuseNext = true;
        await page.waitForSelector("#login:not([hidden])");
        assert.equal(await polls(), 0);
        await signInAgain();
        assert.equal(await polls(), 1);
      }
      // A hidden tab's tick reads nothing; a visible one's reads the list.
      const tick = (hidden: boolean) =>
        page.evaluate(`(() => {
          Object.defineProperty(document, "hidden", { configurable: true, get: () => ${hidden} });
          const before = window.__fetches;
          [...window.__polls.values()][0]();
          return window.__fetches - before;
        })()`);
      assert.equal(await tick(true), 0);
      assert.ok(Number(await tick(false)) > 0);
      await page.close();
    });
  });
});
