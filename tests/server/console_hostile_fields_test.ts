/**
 * Hostile content in every other agent-controlled field the console shows, in
 * headless Chromium: through the fixture agent, a permission request's title,
 * tool kind, path, raw input and option names, a plan entry and a failed
 * prompt's error; through a run stored the way the engine stores it, a tool
 * call's kind and locations, the session's model and mode names, a plan entry's
 * status and a `run.failed` code; and a fenced daemon's ID. None of it opens
 * a dialog, runs script or becomes live markup: each shows as text.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import type { Page } from "puppeteer-core";
import type { RunEvent } from "../../lib/events.ts";
import { FenceStore } from "../../lib/hub/fences.ts";
import {
  agentCommand,
  postJson,
  readSse,
  startServe,
} from "../serve_test_helpers.ts";
import {
  assertQuiet,
  CONSOLE_ARGS,
  dataDirWithEndedRun,
  signIn,
  TOKEN,
  transcriptText,
  waitStatus,
  withBrowser,
} from "../console_helpers.ts";

/** Markup that would run `pwned(what)` if it ever became live. */
const evil = (what: string) =>
  `<img src=x onerror="pwned('${what}')"><script>pwned('${what}')</script>`;

const CALL = {
  kind: evil("kind"),
  title: evil("title"),
  path: evil("path"),
  input: { command: evil("input") },
  names: { allow_once: evil("allow"), reject_once: evil("reject") },
};

const SEEDED = "run-hostile-fields";
const FENCED = evil("daemon");

function seededEvents(): Omit<RunEvent, "run_id">[] {
  return [
    { type: "run.started", data: { agent: evil("agent"), sandbox: "off" } },
    {
      type: "session.configured",
      data: { model: evil("model"), mode: evil("mode"), by: "agent" },
    },
    {
      type: "tool.call.started",
      data: {
        tool_call_id: "tc-1",
        tool_name: "Read",
        kind: evil("tool-kind"),
        parameters: {},
        locations: [{ path: evil("location"), line: 7 }],
      },
    },
    {
      type: "plan.updated",
      data: {
        entries: [{
          content: evil("entry"),
          status: `" onclick="pwned('status')`,
          priority: "high",
        }],
      },
    },
    {
      type: "run.failed",
      data: { code: evil("code"), error: evil("error"), retryable: false },
    },
  ];
}

/** A data dir whose store holds one failed run with hostile fields, and a hostile fence. */
async function seededDataDir(): Promise<string> {
  const dataDir = await dataDirWithEndedRun({
    runId: SEEDED,
    conversationId: "chat-hostile",
    prompt: "look around",
    status: "failed",
    events: seededEvents(),
  });
  await new FenceStore(join(dataDir, "relay")).ensureMarker(FENCED);
  return dataDir;
}

/** Starts a run of the fixture agent with `flags` over the API; its stream is read in the background. */
async function startRun(url: string, workspace: string, flags: string[]) {
  const response = await postJson(`${url}/v1/runs`, {
    input: { text: "go" },
    config: {
      provider: "custom",
      workspace,
      "permission-decision": "ask",
      "acp-command": agentCommand(flags),
    },
  }, { authorization: `Bearer ${TOKEN}` });
  assert.equal(response.status, 200);
  const messages = readSse(response.body!);
  const runId = JSON.parse((await messages.next()).value!.data)
    .run_id as string;
  const drained = (async () => {
    for await (const _ of messages) { /* keep the stream read */ }
  })();
  return { runId, drained };
}

/** Whatever in the page could be live: elements that run or load, and handler attributes. */
function liveMarkup(page: Page) {
  return page.evaluate(`(() => {
    const root = document.getElementById("app");
    return {
      elements: root.querySelectorAll("script, img, iframe, svg, object, embed").length,
      handlers: [...root.querySelectorAll("*")].flatMap((n) =>
        [...n.attributes].map((a) => a.name).filter((a) => a.startsWith("on"))),
    };
  })()`) as Promise<{ elements: number; handlers: string[] }>;
}

async function open(page: Page, runId: string): Promise<void> {
  await page.waitForSelector(`li.run[data-run-id="${runId}"]`);
  await page.click(`li.run[data-run-id="${runId}"]`);
}

async function checkPermission(page: Page, url: string, workspace: string) {
  const run = await startRun(url, workspace, [
    "--permission-calls",
    JSON.stringify([CALL]),
    "--script",
    JSON.stringify([["plan", evil("plan")], ["text", "done"]]),
  ]);
  await open(page, run.runId);
  await page.waitForSelector('.permission button[data-option-id="allow_once"]');
  const card = await page.$eval(".permission", (n) => ({
    ask: n.querySelector(".ask")!.textContent,
    meta: n.querySelector(".meta")!.textContent,
    input: n.querySelector(".input")!.textContent,
    options: [...n.querySelectorAll("button.option")].map((b) => b.textContent),
  }));
  assert.deepEqual(card, {
    ask: `The agent asks: ${evil("title")}`,
    // A kind outside ACP's list never reaches the event (the ACP client drops
    // it); the seeded run shows a hostile tool kind.
    meta: evil("path"),
    input: JSON.stringify(CALL.input),
    options: [evil("allow"), "Always allow", evil("reject"), "Always reject"],
  });
  assert.deepEqual(await liveMarkup(page), { elements: 0, handlers: [] });
  await page.click('.permission button[data-option-id="allow_once"]');
  await waitStatus(page, "completed");
  assert.equal(
    await page.$eval(".plan li", (n) => n.textContent),
    `pending: ${evil("plan")}`,
  );
  await run.drained;
}

async function checkFailedPrompt(page: Page, url: string, workspace: string) {
  const run = await startRun(url, workspace, [
    "--fail-prompt",
    "--fail-prompt-message",
    evil("failure"),
  ]);
  await open(page, run.runId);
  await waitStatus(page, "failed");
  // The badge can follow the stored run before the stream brings run.failed.
  await page.waitForFunction(
    `document.querySelector("#transcript").innerText.includes(${
      JSON.stringify(evil("failure"))
    })`,
  );
  assert.ok((await transcriptText(page)).includes(evil("failure")));
  await run.drained;
}

async function checkSeeded(page: Page) {
  await open(page, SEEDED);
  await waitStatus(page, "failed");
  await page.waitForSelector(".error.note");
  const seen = await page.evaluate(`(() => {
    const text = (selector) => document.querySelector(selector).textContent;
    return {
      sandbox: text(".note.sandbox"),
      session: text(".note.session"),
      kind: text(".tool .kind"),
      where: text(".tool .where"),
      plan: text(".plan li"),
      failed: text(".error.note"),
    };
  })()`);
  assert.deepEqual(seen, {
    sandbox: `Agent: ${evil("agent")} · sandbox: off`,
    session: `[session] model ${evil("model")} · mode ${
      evil("mode")
    } (changed by the agent)`,
    kind: evil("tool-kind"),
    where: `${evil("location")}:7`,
    plan: `" onclick="pwned('status'): ${evil("entry")}`,
    failed: `${evil("code")}: ${evil("error")}`,
  });
}

Deno.test("console: hostile permission titles, kinds, paths, inputs, option names, plans, errors, model and mode names and daemon IDs show as text", async () => {
  const dataDir = await seededDataDir();
  const workspace = join(dataDir, "..", "ws");
  const serve = await startServe({
    dataDir,
    args: [
      ...CONSOLE_ARGS,
      "--daemon-enabled",
      "--daemon-port",
      "0",
      "--daemon-token",
      "console-hostile-daemon-Tq8Wm3Lx6Vz1Pk4Rn9",
    ],
  });
  try {
    await withBrowser(async (browser) => {
      const { page, alarms } = await signIn(browser, serve.url);
      await page.waitForSelector("#app:not([hidden])");
      await page.waitForSelector("#daemons li");
      assert.deepEqual(
        await page.$$eval(
          "#daemons li strong",
          (n) => n.map((s) => s.textContent),
        ),
        [FENCED],
      );
      await checkPermission(page, serve.url, workspace);
      await checkFailedPrompt(page, serve.url, workspace);
      await checkSeeded(page);
      assert.deepEqual(await liveMarkup(page), { elements: 0, handlers: [] });
      assertQuiet(alarms);
    });
  } finally {
    await serve.stop();
  }
});
