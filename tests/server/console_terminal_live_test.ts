/**
 * Client terminals live in the console, in headless Chromium, through a real
 * `runner serve` running the fixture agent with `client-terminals=true`: the
 * agent's command prints hostile output (HTML, script, ANSI escapes, a line
 * far wider than a phone) in pieces the test releases through named pipes,
 * and the operator watches it grow inside the tool card that names the
 * terminal, then sees its exit status; nothing of it ever runs, and the page
 * never gets wider than the phone. With a rule that asks for `execute`, the
 * command's permission card appears first, the operator approves it from
 * the card, and only then does its output stream. That scene (a tool card,
 * a terminal block with output and a waiting permission card) is also the
 * docs' screenshot.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import type { Page } from "puppeteer-core";
import {
  agentCommand,
  makeFifo,
  openGate,
  withServe,
} from "../serve_test_helpers.ts";
import {
  assertQuiet,
  assertTranscriptInert,
  CONSOLE_ARGS,
  DESKTOP,
  PHONE,
  signIn,
  startRunFromPage,
  waitStatus,
  withBrowser,
} from "../console_helpers.ts";

/** A word no line break can split: it must wrap or scroll inside its block. */
const WIDE = "w".repeat(600);

/** Writes `script` into `workspace` and makes its gates (`gate-N` pipes). */
async function prepare(
  workspace: string,
  scripts: Record<string, string>,
  gates: string[],
): Promise<void> {
  await Deno.mkdir(workspace, { recursive: true });
  for (const [name, text] of Object.entries(scripts)) {
    await Deno.writeTextFile(join(workspace, name), text);
  }
  for (const gate of gates) await makeFifo(join(workspace, gate));
}

/** The terminal flag of the fixture: `sh <script>` shown as `title`. */
function terminalFlag(
  script: string,
  options: { title: string; args?: string[] },
): string[] {
  const args = [script, ...options.args ?? []];
  return [
    "--terminal",
    JSON.stringify({ command: "sh", args, title: options.title }),
  ];
}

/** What the operator sees of the terminal in tool card `toolCallId`. */
function terminalIn(page: Page, toolCallId: string) {
  return page.$eval(
    `.tool[data-tool-call-id="${toolCallId}"]`,
    (card) => ({
      title: card.querySelector("summary .title")!.textContent,
      status: card.querySelector("summary .status")!.textContent,
      open: card.hasAttribute("open"),
      command: card.querySelector(".terminal .command")?.textContent,
      cwd: card.querySelector(".terminal .cwd")?.textContent,
      output: card.querySelector(".terminal .terminal-output")?.textContent,
      exit: card.querySelector(".terminal .terminal-status")?.textContent,
    }),
  );
}

/** Waits until the terminal in tool card `toolCallId` shows `text`. */
async function waitOutput(
  page: Page,
  toolCallId: string,
  text: string,
): Promise<void> {
  await page.waitForFunction(
    `(document.querySelector('.tool[data-tool-call-id="${toolCallId}"] .terminal-output')?.textContent ?? "").includes(${
      JSON.stringify(text)
    })`,
  );
}

/** How far the page and the terminal blocks reach past the screen's width. */
async function overflow(page: Page): Promise<unknown> {
  // A string: the test's type check has no DOM library.
  return await page.evaluate(`(() => {
    const width = document.documentElement.clientWidth;
    const blocks = [...document.querySelectorAll(".terminal")];
    return {
      page: document.documentElement.scrollWidth - width,
      blocks: blocks.map((b) =>
        Math.max(0, Math.ceil(b.getBoundingClientRect().right - width))),
      // Wider than its block only if it scrolls inside it.
      unscrolled: blocks.map((b) => b.querySelector(".terminal-output"))
        .filter((pre) => pre.scrollWidth > pre.clientWidth &&
          !["auto", "scroll"].includes(getComputedStyle(pre).overflowX)).length,
    };
  })()`);
}

const HOSTILE = [
  "printf '%s\\n' '<img src=x onerror=alert(1)>'",
  `printf '\\033[31m%s\\033[0m\\n' '<script>pwned("script")</script>'`,
  "read go < gate-1",
  `printf '%s\\n' '${WIDE}'`,
  `printf '%s\\n' '<img src=x onerror="pwned(2)">'`,
  "read go < gate-2",
  "printf '\\033[1;32m%s\\033[0m\\r\\n' 'done'",
  "exit 3",
].join("\n") + "\n";

Deno.test("console: a live terminal's hostile output grows piece by piece inside its tool card, wraps on a phone, never runs, and ends with its exit status", async () => {
  await withBrowser(async (browser) => {
    await withServe({
      args: [...CONSOLE_ARGS, "--client-terminals", "true"],
    }, async (serve, dir) => {
      const workspace = join(dir, "ws");
      await prepare(workspace, { "build.sh": HOSTILE }, ["gate-1", "gate-2"]);
      const { page, alarms } = await signIn(browser, serve.url);
      await page.waitForSelector("#app:not([hidden])");
      await startRunFromPage(page, {
        prompt: "build it",
        workspace,
        config: {
          "acp-command": agentCommand(terminalFlag("build.sh", {
            title: "Build",
            args: [`--target=${WIDE}`],
          })),
          "client-terminals": true,
        },
      });
      const first = "<img src=x onerror=alert(1)>\n" +
        '<script>pwned("script")</script>\n';
      await waitOutput(page, "terminal-call-0", first);
      const shown = await terminalIn(page, "terminal-call-0");
      assert.deepEqual(shown, {
        status: "in_progress",
        title: "Build",
        open: true,
        command: `$ sh build.sh --target=${WIDE}`,
        cwd: "in the workspace",
        output: first,
        exit: "running…",
      });
      await openGate(join(workspace, "gate-1"));
      const second = `${WIDE}\n<img src=x onerror="pwned(2)">\n`;
      await waitOutput(page, "terminal-call-0", second);
      const growing = await terminalIn(page, "terminal-call-0");
      assert.equal(growing.output, first + second);
      assert.equal(growing.exit, "running…");
      // On the phone the wide line stays inside its block.
      assert.deepEqual(await overflow(page), {
        page: 0,
        blocks: [0],
        unscrolled: 0,
      });
      await openGate(join(workspace, "gate-2"));
      await waitStatus(page, "completed");
      await waitOutput(page, "terminal-call-0", "done\n");
      assert.deepEqual(await terminalIn(page, "terminal-call-0"), {
        title: "Build",
        status: "failed",
        open: true,
        command: `$ sh build.sh --target=${WIDE}`,
        cwd: "in the workspace",
        output: first + second + "done\n",
        exit: "exited: exit code 3",
      });
      assert.equal(
        await page.$eval(
          ".terminal-status",
          (n) => n.classList.contains("failed"),
        ),
        true,
      );
      assert.deepEqual(await overflow(page), {
        page: 0,
        blocks: [0],
        unscrolled: 0,
      });
      await assertTranscriptInert(page);
      assertQuiet(alarms);
    });
  });
});

const TESTS = [
  "printf '%s\\n' 'running 3 tests from ./lib'",
  "for t in parse_config spawn_agent stream_events; do",
  "  printf '%s ... \\033[32mok\\033[0m\\n' \"$t\"",
  "done",
  "printf '\\n\\033[32m%s\\033[0m\\n' 'ok | 3 passed | 0 failed'",
].join("\n") + "\n";

const DEPLOY = [
  "printf '%s\\n' 'uploading build to staging'",
  "read go < gate-1",
  "printf '%s\\n' '<script>pwned(\"deploy\")</script>deployed'",
].join("\n") + "\n";

/**
 * Phone and desktop screenshots of the run as it waits for the operator.
 * `RUNNER_CONSOLE_SCREENSHOTS=docs` refreshes the docs' `console.png` (phone)
 * and `console-desktop.png`.
 */
async function screenshots(page: Page, dir: string): Promise<void> {
  const into = Deno.env.get("RUNNER_CONSOLE_SCREENSHOTS") ?? dir;
  for (
    const [name, viewport] of [
      ["console.png", PHONE],
      ["console-desktop.png", DESKTOP],
    ] as const
  ) {
    await page.setViewport(viewport);
    // The phone shows the cards; the desktop the whole page.
    const phone = viewport === PHONE;
    await page.$eval(phone ? ".tool" : "header", (n) => n.scrollIntoView());
    if (phone) await page.evaluate("window.scrollBy(0, -8)");
    const path = join(into, name);
    await page.screenshot({ path, fullPage: !phone });
    const png = await Deno.readFile(path);
    assert.deepEqual([...png.subarray(1, 4)], [0x50, 0x4e, 0x47]);
  }
  await page.setViewport(PHONE);
}

Deno.test("console: a rule asks before a command runs; the operator approves it from its card, then its output streams", async () => {
  await withBrowser(async (browser) => {
    await withServe({
      args: [...CONSOLE_ARGS, "--client-terminals", "true"],
    }, async (serve, dir) => {
      const workspace = join(dir, "ws");
      await prepare(workspace, { "test.sh": TESTS, "deploy.sh": DEPLOY }, [
        "gate-1",
      ]);
      const { page, alarms } = await signIn(browser, serve.url);
      await page.waitForSelector("#app:not([hidden])");
      await startRunFromPage(page, {
        prompt: "test, then deploy",
        conversation: "chat-deploy",
        workspace,
        config: {
          "acp-command": agentCommand([
            "--rich-updates",
            ...terminalFlag("test.sh", { title: "Run the tests" }),
            ...terminalFlag("deploy.sh", { title: "Deploy to staging" }),
          ]),
          "client-terminals": true,
          "permission-rules-json": [
            { kind: "execute", title: "sh test.sh", decision: "allow" },
            { kind: "execute", decision: "ask" },
          ],
        },
      });
      const card = ".permission:not(.decided)";
      await page.waitForSelector(`${card} button.option`);
      assert.equal(
        await page.$eval(`${card} .ask`, (n) => n.textContent),
        "The agent asks: sh deploy.sh",
      );
      assert.deepEqual(
        await page.$$eval(
          `${card} button.option`,
          (nodes) => nodes.map((n) => `${n.textContent}=${n.dataset.kind}`),
        ),
        ["Run=allow_once", "Don't run=reject_once"],
      );
      // The allowed command ran to its end; the asked one has not started.
      // (Output is painted on the next frame: wait for its last line.)
      await waitOutput(page, "terminal-call-0", "ok | 3 passed | 0 failed\n");
      assert.deepEqual(await terminalIn(page, "terminal-call-0"), {
        title: "Run the tests",
        status: "completed",
        open: true,
        command: "$ sh test.sh",
        cwd: "in the workspace",
        output: "running 3 tests from ./lib\nparse_config ... ok\n" +
          "spawn_agent ... ok\nstream_events ... ok\n\nok | 3 passed | 0 failed\n",
        exit: "exited: exit code 0",
      });
      assert.equal(await page.$$eval(".terminal", (n) => n.length), 1);
      await screenshots(page, dir);
      await page.click(`${card} button[data-option-id="run"]`);
      await waitOutput(page, "terminal-call-1", "uploading build to staging\n");
      const started = await terminalIn(page, "terminal-call-1");
      assert.equal(started.output, "uploading build to staging\n");
      assert.equal(started.exit, "running…");
      assert.match(
        await page.$eval(
          ".permission.decided .decision",
          (n) => n.textContent!,
        ),
        /^Decided: allow_once \(run\) by caller/,
      );
      await openGate(join(workspace, "gate-1"));
      await waitStatus(page, "completed");
      await waitOutput(page, "terminal-call-1", "deployed\n");
      assert.deepEqual(await terminalIn(page, "terminal-call-1"), {
        title: "Deploy to staging",
        status: "completed",
        open: true,
        command: "$ sh deploy.sh",
        cwd: "in the workspace",
        output: 'uploading build to staging\n<script>pwned("deploy")</script>' +
          "deployed\n",
        exit: "exited: exit code 0",
      });
      await assertTranscriptInert(page);
      assertQuiet(alarms);
    });
  });
});
