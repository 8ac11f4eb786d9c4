/**
 * Terminal output and follow-ups in the console, in headless Chromium,
 * through a real `runner serve` and its SSE (`GET /v1/runs/{id}/events`):
 * the run's events are written to the store the server then opens, the way
 * the engine stores them (`terminal.*` events come from the runner's ACP
 * client terminals; follow-ups from `turn.started`). Terminal output is
 * appended as text inside the tool card that names its terminal (or a card
 * of its own), hostile output never executes, ANSI escapes are stripped even
 * when split across events, the exit status shows, and a large output keeps
 * only its last 256 KiB on the page.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Page } from "puppeteer-core";
import type { RunEvent } from "../../lib/events.ts";
import { startServe } from "../serve_test_helpers.ts";
import {
  assertQuiet,
  assertTranscriptInert,
  CONSOLE_ARGS,
  dataDirWithEndedRun,
  signIn,
  waitStatus,
  withBrowser,
} from "../console_helpers.ts";

const RUN_ID = "run-terminals";
const KEEP = 256 * 1024;
/** One line of the large output: 1 KiB with its number. */
const line = (n: number) =>
  `line ${String(n).padStart(5, "0")} `.padEnd(1023, "x") + "\n";
const LINES = 600; // about 600 KiB, more than the page keeps

function events(): Omit<RunEvent, "run_id">[] {
  const list: Omit<RunEvent, "run_id">[] = [
    { type: "run.started", data: { agent: "cold", sandbox: "off" } },
    {
      type: "tool.call.started",
      data: {
        tool_call_id: "tc-1",
        tool_name: "<script>pwned('tool')</script>Run the tests",
        kind: "execute",
        parameters: { command: "npm test" },
      },
    },
    {
      type: "terminal.started",
      data: {
        terminal_id: "term-1",
        command: "npm",
        args: ["test", "--", "<b>it's</b>"],
        cwd: "/srv/<i>w</i>",
      },
    },
    {
      type: "tool.call.updated",
      data: {
        tool_call_id: "tc-1",
        status: "in_progress",
        terminal_ids: ["term-1"],
      },
    },
    ...[
      "<script>pwned('out')</script>\n",
      "\x1b[31mred\x1b[0m <img src=x onerror=\"pwned('img')\">\n",
      "\x1b[3", // an escape split across two events
      "2mgreen\x1b[0m\r\n\x1b]0;title\x07done\n",
    ].map((output) => ({
      type: "terminal.output",
      data: { terminal_id: "term-1", output, truncated: false },
    })),
    {
      type: "terminal.exited",
      data: {
        terminal_id: "term-1",
        exit_code: 1,
        signal: null,
        truncated: false,
        timed_out: false,
      },
    },
    {
      type: "tool.call.completed",
      data: {
        tool_call_id: "tc-1",
        tool_name: "Run the tests",
        result: "1 failed",
      },
    },
    // A terminal no tool card names: a card of its own.
    {
      type: "terminal.started",
      data: {
        terminal_id: "term-2",
        command: "sleep",
        args: ["999"],
        cwd: "/srv/w",
      },
    },
    {
      type: "terminal.output",
      data: { terminal_id: "term-2", output: "zzz\n", truncated: true },
    },
    {
      type: "terminal.exited",
      data: {
        terminal_id: "term-2",
        exit_code: null,
        signal: "SIGKILL",
        truncated: true,
        timed_out: true,
      },
    },
    {
      type: "turn.started",
      data: {
        turn: 2,
        input: {
          text: "<img src=x onerror=\"pwned('follow-up')\"> and now build",
          attachments: [{ name: "<b>log</b>.txt", mime_type: "text/plain" }],
        },
      },
    },
    // A large output, then a tool card that names that terminal after it began.
    {
      type: "terminal.started",
      data: { terminal_id: "term-3", command: "make", args: [], cwd: "/srv/w" },
    },
  ];
  for (let n = 0; n < LINES; n++) {
    list.push({
      type: "terminal.output",
      data: { terminal_id: "term-3", output: line(n), truncated: false },
    });
  }
  list.push(
    {
      type: "tool.call.started",
      data: {
        tool_call_id: "tc-2",
        tool_name: "Build",
        kind: "execute",
        parameters: {},
        terminal_ids: ["term-3"],
      },
    },
    {
      type: "terminal.exited",
      data: {
        terminal_id: "term-3",
        exit_code: 0,
        signal: null,
        truncated: false,
        timed_out: false,
      },
    },
    // A terminal whose exit never came: the run's end says so.
    {
      type: "terminal.started",
      data: {
        terminal_id: "term-4",
        command: "tail",
        args: ["-f", "log"],
        cwd: "/srv/w",
      },
    },
    {
      type: "message.completed",
      data: { message: { role: "assistant", content: "Built." } },
    },
    { type: "run.completed", data: { finish_reason: "end_turn" } },
  );
  return list;
}

/** A data dir whose store holds one finished run with `events()`. */
function seededDataDir(): Promise<string> {
  return dataDirWithEndedRun({
    runId: RUN_ID,
    conversationId: "chat-terminals",
    prompt: "run the tests",
    status: "completed",
    events: events(),
  });
}

function terminalView(page: Page, id: string) {
  return page.$eval(`.terminal[data-terminal-id="${id}"]`, (node) => ({
    card: node.closest(".tool")?.getAttribute("data-tool-call-id") ??
      `own:${node.closest(".tool")?.getAttribute("data-terminal-card")}`,
    command: node.querySelector(".command")!.textContent,
    cwd: node.querySelector(".cwd")!.textContent,
    output: node.querySelector(".terminal-output")!.textContent!,
    nodes: node.querySelector(".terminal-output")!.childNodes.length,
    elements: node.querySelector(".terminal-output")!.children.length,
    status: node.querySelector(".terminal-status")!.textContent,
    truncated: !node.querySelector(".badge.truncated")!.hasAttribute("hidden"),
    cut: !node.querySelector(".terminal-cut")!.hasAttribute("hidden"),
    following: (() => {
      const pre = node.querySelector(".terminal-output")!;
      return pre.scrollTop > 0 &&
        pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 8;
    })(),
  }));
}

Deno.test("console: terminal output streams as text into its tool card, hostile output never runs, large output keeps its last 256 KiB; follow-ups come from turn.started", async () => {
  const dataDir = await seededDataDir();
  const serve = await startServe({ dataDir, args: CONSOLE_ARGS });
  try {
    await withBrowser(async (browser) => {
      const { page, alarms } = await signIn(browser, serve.url);
      await page.waitForSelector(`li.run[data-run-id="${RUN_ID}"]`);
      await page.click(`li.run[data-run-id="${RUN_ID}"]`);
      await waitStatus(page, "completed");
      await page.waitForFunction(
        `(document.querySelector('.terminal[data-terminal-id="term-3"] .terminal-output')?.textContent ?? "").includes(${
          JSON.stringify(line(LINES - 1))
        })`,
      );
      const first = await terminalView(page, "term-1");
      assert.deepEqual(first, {
        card: "tc-1",
        command: "$ npm test -- '<b>it'\\''s</b>'",
        cwd: "in /srv/<i>w</i>",
        output: "<script>pwned('out')</script>\n" +
          "red <img src=x onerror=\"pwned('img')\">\ngreen\ndone\n",
        nodes: 1,
        elements: 0,
        status: "exited: exit code 1",
        truncated: false,
        cut: false,
        following: false,
      });
      const own = await terminalView(page, "term-2");
      assert.equal(own.card, "own:term-2");
      assert.equal(own.command, "$ sleep 999");
      assert.equal(own.output, "zzz\n");
      assert.equal(own.status, "exited: timed out · killed by SIGKILL");
      assert.equal(own.truncated, true);
      assert.equal(
        await page.$eval(
          '[data-terminal-card="term-2"] summary .title',
          (n) => n.textContent,
        ),
        "sleep 999",
      );
      // term-3 began in a card of its own and moved into the tool card that named it.
      const large = await terminalView(page, "term-3");
      assert.equal(large.card, "tc-2");
      assert.equal(
        await page.$$eval('[data-terminal-card="term-3"]', (n) => n.length),
        0,
      );
      assert.equal(large.status, "exited: exit code 0");
      assert.equal(large.cut, true);
      assert.equal(large.output.length, KEEP);
      assert.ok(large.output.endsWith(line(LINES - 1)));
      assert.ok(!large.output.includes("line 00000 "));
      assert.equal(large.elements, 0);
      // It follows its end, also after it moved into the tool card.
      assert.equal(large.following, true);
      assert.equal(
        (await terminalView(page, "term-4")).status,
        "no exit status: the run ended",
      );
      // The follow-up, from its event: as text, with its attachment's name.
      const bubbles = await page.$$eval(
        ".bubble.user",
        (nodes) => nodes.map((n) => n.textContent),
      );
      assert.deepEqual(bubbles, [
        "Yourun the tests",
        "Follow-up · turn 2<img src=x onerror=\"pwned('follow-up')\"> and now build" +
        "attached (not forwarded): <b>log</b>.txt (text/plain)",
      ]);
      await assertTranscriptInert(page);
      assertQuiet(alarms);
    });
  } finally {
    await serve.stop();
  }
});
