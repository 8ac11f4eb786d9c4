/**
 * Hostile agent output in the console, in headless Chromium: Markdown and
 * HTML in the answer, thoughts, tool titles, tool inputs and outputs never
 * execute (no dialog opens, the probe `window.pwned` is never called), links
 * are inert or `rel=noopener`, and images from the agent's URLs load only
 * when the operator allows them.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import type { Page } from "puppeteer-core";
import { agentCommand, postJson, withServe } from "../serve_test_helpers.ts";
import {
  assertQuiet,
  CONSOLE_ARGS,
  signIn,
  TOKEN,
  waitStatus,
  withBrowser,
} from "../console_helpers.ts";

const ANSWER = [
  "# Report\n\n**bold** and a list:\n\n- one\n- two\n\n",
  "```html\n<script>pwned('code')</script>\n```\n\n",
  "<script>pwned('script')</script>\n\n",
  "<img src=x onerror=\"pwned('img')\">\n\n",
  "<svg onload=\"pwned('svg')\"></svg>\n\n",
  "<iframe src=\"javascript:pwned('iframe')\"></iframe>\n\n",
  "[click me](javascript:pwned('link')) ",
  "<a href=\"javascript:pwned('a')\">raw link</a> ",
  "[docs](https://docs.example/page) ",
  "![remote](https://images.example/evil.png)\n",
].join("");

const STEPS = [
  ["thought", "<img src=x onerror=\"pwned('thought')\">"],
  [
    "tool-with",
    "<script>pwned('title')</script><b>title</b>",
    "<img src=x onerror=\"pwned('input')\">",
    "<svg onload=\"pwned('output')\"></svg>",
  ],
  [
    "tool-diff",
    "<b>notes</b>.txt",
    "keep\n<script>pwned('old')</script>\n",
    "keep\n<img src=x onerror=\"pwned('new')\">\n",
  ],
  ["text", ANSWER],
];

async function hostileRun(url: string, workspace: string): Promise<string> {
  const response = await postJson(`${url}/v1/runs`, {
    input: { text: "<img src=x onerror=\"pwned('prompt')\">" },
    config: {
      provider: "custom",
      workspace,
      "acp-command": agentCommand(["--script", JSON.stringify(STEPS)]),
    },
    stream: false,
  }, { authorization: `Bearer ${TOKEN}` });
  assert.equal(response.status, 200);
  return ((await response.json()) as { run_id: string }).run_id;
}

/** What the rendered transcript holds that could be live. */
function liveMarkup(page: Page) {
  return page.$eval("#transcript", (root) => ({
    scripts: root.querySelectorAll("script, iframe, svg, object, embed").length,
    handlers: [...root.querySelectorAll("*")].flatMap((n) =>
      [...n.attributes].map((a) => a.name).filter((a) => a.startsWith("on"))
    ),
    hrefs: [...root.querySelectorAll("a")].map((a) => ({
      href: a.getAttribute("href"),
      rel: a.getAttribute("rel"),
    })),
    images: [...root.querySelectorAll("img")].map((i) => i.getAttribute("src")),
    strong: root.querySelector(".markdown strong")?.textContent,
    items: root.querySelectorAll(".markdown li").length,
    code: root.querySelector(".markdown pre code")?.textContent,
    title: root.querySelector(".tool .title")?.textContent,
    input: root.querySelector(".tool .input")?.textContent,
    output: root.querySelector(".tool .output")?.textContent,
    diff: [...root.querySelectorAll(".diff span")].map((n) =>
      `${n.className}:${n.textContent}`
    ),
    diffLabel: root.querySelector(".diffs .label")?.textContent,
  }));
}

async function openAndWait(page: Page, runId: string): Promise<void> {
  await page.waitForSelector(`li.run[data-run-id="${runId}"]`);
  await page.click(`li.run[data-run-id="${runId}"]`);
  await waitStatus(page, "completed");
  await page.waitForSelector(".markdown strong");
  // Open every collapsed card so their contents are in the rendered page too.
  await page.$$eval(
    "details",
    (nodes) => nodes.forEach((n) => n.setAttribute("open", "")),
  );
}

Deno.test("console: hostile Markdown and HTML in answers, thoughts, tool titles, inputs and outputs never execute", async () => {
  await withBrowser(async (browser) => {
    await withServe({ args: CONSOLE_ARGS }, async (serve, dir) => {
      const runId = await hostileRun(serve.url, join(dir, "ws"));
      const { page, alarms } = await signIn(browser, serve.url);
      const requested: string[] = [];
      page.on("request", (request) => requested.push(request.url()));
      await page.waitForSelector("#app:not([hidden])");
      await openAndWait(page, runId);
      const live = await liveMarkup(page);
      assert.equal(live.scripts, 0);
      assert.deepEqual(live.handlers, []);
      // The javascript: link keeps its text and loses its target.
      assert.deepEqual(live.hrefs, [
        { href: null, rel: "noopener noreferrer nofollow" },
        {
          href: "https://docs.example/page",
          rel: "noopener noreferrer nofollow",
        },
      ]);
      assert.deepEqual(live.images, [null]);
      assert.equal(live.strong, "bold");
      assert.equal(live.items, 2);
      assert.equal(live.code, "<script>pwned('code')</script>\n");
      assert.equal(live.title, "<script>pwned('title')</script><b>title</b>");
      assert.deepEqual(JSON.parse(live.input!), {
        command: "<img src=x onerror=\"pwned('input')\">",
      });
      assert.equal(live.output, "<svg onload=\"pwned('output')\"></svg>");
      assert.equal(live.diffLabel, "Edit <b>notes</b>.txt");
      assert.deepEqual(live.diff, [
        "ctx:  keep\n",
        "del:- <script>pwned('old')</script>\n",
        "add:+ <img src=x onerror=\"pwned('new')\">\n",
        "ctx:  \n",
      ]);
      // The raw HTML of the answer shows as text.
      assert.match(
        await page.$eval(".markdown", (n) => n.textContent!),
        /<script>pwned\('script'\)<\/script>/,
      );
      assert.deepEqual(requested.filter((u) => u.includes(".example")), []);
      assertQuiet(alarms);
    });
  });
});

Deno.test("console: images from the agent's URLs load only once the operator allows them", async () => {
  await withBrowser(async (browser) => {
    await withServe({ args: CONSOLE_ARGS }, async (serve, dir) => {
      const runId = await hostileRun(serve.url, join(dir, "ws"));
      const { page, alarms } = await signIn(browser, `${serve.url}/?images=1`);
      await page.waitForSelector("#app:not([hidden])");
      assert.equal(
        await page.$eval("#images", (n) =>
          n.hasAttribute("checked") ||
          (n as unknown as { checked: boolean }).checked),
        true,
      );
      await openAndWait(page, runId);
      const live = await liveMarkup(page);
      assert.deepEqual(live.images, ["https://images.example/evil.png"]);
      assert.equal(live.scripts, 0);
      assert.deepEqual(live.handlers, []);
      const csp = (await fetch(`${serve.url}/?images=1`)).headers.get(
        "content-security-policy",
      )!;
      assert.match(csp, /img-src 'self' data: https:/);
      assert.match(csp, /script-src 'nonce-[0-9a-f]{32}';/);
      assertQuiet(alarms);
    });
  });
});
