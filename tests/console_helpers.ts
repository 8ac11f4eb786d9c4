/**
 * Helpers of the console's browser tests: a headless Chromium (Debian's
 * `chromium`, driven by puppeteer-core), signing in, and a page that records
 * every dialog and every run of a probe function hostile content would call.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import puppeteer, { type Browser, type Page } from "puppeteer-core";
import type { RunEvent } from "../lib/events.ts";
import { openStore } from "../lib/store/open.ts";
import type { RunOutcome } from "../lib/store/types.ts";
import { fixtureCommand, tempDir } from "./helpers.ts";
import {
  postJson,
  type ServeProcess,
  withServe,
} from "./serve_test_helpers.ts";

/** The API token every console test's server runs with. */
export const TOKEN = "console-test-token-Vb7Qw2Lm9Xk4Pz8Tn3Rj6Hs1";
/** `runner serve` arguments of the console tests. */
export const CONSOLE_ARGS = ["--allow-custom-commands", "--api-token", TOKEN];
const CHROMIUM = Deno.env.get("CHROMIUM_PATH") ?? "/usr/bin/chromium";

/** A phone-sized and a desktop-sized screen. */
export const PHONE = { width: 390, height: 844, deviceScaleFactor: 1 };
/** A desktop-sized screen. */
export const DESKTOP = { width: 1280, height: 900, deviceScaleFactor: 1 };

/**
 * How long a console test waits for the page to show something before it
 * fails: a hang guard only, generous for a machine running the whole suite.
 */
const PAGE_WAIT_MS = 180_000;

/** Opens a tab whose waits allow for a loaded machine. */
export async function openPage(browser: Browser): Promise<Page> {
  const page = await browser.newPage();
  page.setDefaultTimeout(PAGE_WAIT_MS);
  return page;
}

/** Runs `body` with a fresh headless Chromium, closed afterwards. */
export async function withBrowser(
  body: (browser: Browser) => Promise<void>,
): Promise<void> {
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
      "--disable-quic",
    ],
  });
  try {
    await body(browser);
  } finally {
    await browser.close();
  }
}

/** What a page saw that it never should: dialogs, probe calls, CSP refusals, script errors. */
export interface PageAlarms {
  /** Messages of `alert`/`confirm`/`prompt` dialogs. */
  dialogs: string[];
  /** Arguments of calls to `window.pwned`, which hostile payloads call. */
  executed: string[];
  /** Uncaught errors of the page's own script. */
  errors: string[];
  /**
   * Content Security Policy refusals: `securitypolicyviolation` events and
   * console errors that name the policy.
   */
  csp: string[];
}

const cspListeners = new WeakMap<PageAlarms, Set<() => void>>();

function recordCsp(alarms: PageAlarms, what: string): void {
  alarms.csp.push(what);
  for (const listener of cspListeners.get(alarms) ?? []) listener();
}

/** Resolves once `alarms` holds a CSP refusal that matches `pattern`. */
export function cspRefusal(alarms: PageAlarms, pattern: RegExp): Promise<void> {
  return new Promise((resolve) => {
    const listeners = cspListeners.get(alarms) ?? new Set();
    cspListeners.set(alarms, listeners);
    const check = () => {
      if (!alarms.csp.some((what) => pattern.test(what))) return;
      listeners.delete(check);
      resolve();
    };
    listeners.add(check);
    check();
  });
}

/**
 * Starts recording `page`'s alarms; call before the page loads, so the CSP
 * listener is in place before any of the page's own scripts run. Dialogs
 * whose message matches `accept` are accepted instead (a confirmation the
 * test expects).
 */
export async function watchPage(
  page: Page,
  options: { accept?: RegExp } = {},
): Promise<PageAlarms> {
  const alarms: PageAlarms = { dialogs: [], executed: [], errors: [], csp: [] };
  page.on("dialog", (dialog) => {
    if (options.accept?.test(dialog.message())) {
      dialog.accept().catch(() => {});
      return;
    }
    alarms.dialogs.push(dialog.message());
    dialog.dismiss().catch(() => {});
  });
  page.on("pageerror", (error) => alarms.errors.push(String(error)));
  page.on("console", (message) => {
    if (
      message.type() === "error" &&
      /Content Security Policy/i.test(message.text())
    ) recordCsp(alarms, message.text());
  });
  await page.exposeFunction("pwned", (what: string) => {
    alarms.executed.push(String(what));
  });
  await page.exposeFunction("__cspRefused", (what: string) => {
    recordCsp(alarms, String(what));
  });
  await page.evaluateOnNewDocument(`document.addEventListener(
    "securitypolicyviolation",
    (event) => window.__cspRefused(event.violatedDirective + " refused " +
      (event.blockedURI || "inline") + " (" + event.sourceFile + ":" +
      event.lineNumber + ")"),
    true,
  );`);
  return alarms;
}

/**
 * Opens the console at `url` on `viewport` and signs in with `token`; the
 * page's own confirmations that match `accept` are accepted, not alarms.
 */
export async function signIn(
  browser: Browser,
  url: string,
  options: { token?: string; viewport?: typeof PHONE; accept?: RegExp } = {},
): Promise<{ page: Page; alarms: PageAlarms }> {
  const page = await openPage(browser);
  const alarms = await watchPage(page, { accept: options.accept });
  await page.setViewport(options.viewport ?? PHONE);
  await page.goto(url, { waitUntil: "load" });
  await page.waitForSelector("#login:not([hidden])");
  await page.type("#token", options.token ?? TOKEN);
  await page.click("#login button[type=submit]");
  return { page, alarms };
}

/** A console signed in to a fresh `runner serve` in a fresh headless Chromium. */
export interface OpenConsole {
  browser: Browser;
  /** The server, started with {@linkcode CONSOLE_ARGS}. */
  serve: ServeProcess;
  /** The server's own temporary directory. */
  dir: string;
  /** The console's page, past sign-in, its app shown. */
  page: Page;
  alarms: PageAlarms;
}

/**
 * Runs `body` with the console signed in (on `viewport`, a phone by default)
 * to a fresh `runner serve` with {@linkcode CONSOLE_ARGS}, in a fresh
 * headless Chromium; stops both afterwards.
 */
export async function withOpenConsole(
  body: (open: OpenConsole) => Promise<void>,
  options: { viewport?: typeof PHONE } = {},
): Promise<void> {
  await withBrowser(async (browser) => {
    await withServe({ args: CONSOLE_ARGS }, async (serve, dir) => {
      const { page, alarms } = await signIn(browser, serve.url, options);
      await page.waitForSelector("#app:not([hidden])");
      await body({ browser, serve, dir, page, alarms });
    });
  });
}

/** Waits until the run panel's status badge says `status` (an ended one: with its whole transcript shown). */
export async function waitStatus(page: Page, status: string): Promise<void> {
  // An ended run's badge can come from its record before its events are
  // shown: wait until the page says the transcript is whole, too.
  const settled = status === "active" || status === "loading"
    ? ""
    : ` && document.getElementById("run-status").dataset.settled === "yes"`;
  await page.waitForFunction(
    `document.getElementById("run-status").textContent === ${
      JSON.stringify(status)
    }${settled}`,
  );
}

/** The transcript's visible text. */
export function transcriptText(page: Page): Promise<string> {
  return page.$eval(
    "#transcript",
    (node) => (node as unknown as { innerText: string }).innerText,
  );
}

/** Fails if the page raised a dialog, ran a hostile probe, threw or broke its CSP. */
export function assertQuiet(alarms: PageAlarms): void {
  assert.deepEqual(alarms.dialogs, [], "a dialog opened");
  assert.deepEqual(alarms.executed, [], "hostile script ran");
  assert.deepEqual(alarms.errors, [], "the page threw");
  assert.deepEqual(alarms.csp, [], "the page broke its CSP");
}

/** What the console's "New run" form is filled with. */
export interface NewRunForm {
  /** The prompt. */
  prompt: string;
  /** The conversation id, if any. */
  conversation?: string;
  /** The workspace. */
  workspace: string;
  /** How permission requests are decided (`ask`, `allow`, `reject`). */
  permission?: string;
  /** The form's "more run config" JSON. */
  config: Record<string, unknown>;
}

/** Fills and submits the console's "New run" form. */
export async function startRunFromPage(
  page: Page,
  run: NewRunForm,
): Promise<string> {
  await fillNewRun(page, run);
  const before = await page.$eval("#run-title", (node) => node.textContent);
  await page.click("#new-run button[type=submit]");
  await waitNewRun(page, before ?? "");
  return await page.$eval("#run-title", (node) => node.textContent!);
}

/** Opens the console's "New run" form and fills it, without submitting. */
export async function fillNewRun(page: Page, run: NewRunForm): Promise<void> {
  if (await page.$("#new-run[hidden]")) await page.click("#new-run-open");
  await page.waitForSelector("#new-run:not([hidden])");
  await page.waitForSelector('#new-provider option[value="custom"]');
  await page.select("#new-provider", "custom");
  await page.type("#new-prompt", run.prompt);
  if (run.conversation) await page.type("#new-conversation", run.conversation);
  await page.type("#new-workspace", run.workspace);
  if (run.permission) await page.select("#new-permission", run.permission);
  await page.$eval(
    "#new-config",
    (node, value) => (node as unknown as { value: string }).value = value,
    JSON.stringify(run.config),
  );
}

/** Waits until the run panel shows a run the console started, other than `previous`. */
export async function waitNewRun(page: Page, previous: string): Promise<void> {
  try {
    await page.waitForFunction(
      `(() => { const t = document.getElementById("run-title").textContent;
      return t.startsWith("console-") && t !== ${
        JSON.stringify(previous)
      }; })()`,
    );
  } catch (error) {
    throw new Error(
      `no new run opened; the page shows ${
        JSON.stringify(await panelState(page))
      }`,
      { cause: error },
    );
  }
}

/** What the run panel and the forms say, for a failure's message. */
async function panelState(page: Page): Promise<unknown> {
  const ids = [
    "run-title",
    "run-status",
    "run-error",
    "run-stream",
    "follow-up-error",
    "new-error",
  ];
  return await page.evaluate(`(() => {
    const shown = {};
    for (const id of ${JSON.stringify(ids)}) {
      shown[id] = document.getElementById(id)?.textContent ?? "(none)";
    }
    shown["follow-up-text"] = document.getElementById("follow-up-text")?.value ?? "(none)";
    return shown;
  })()`);
}

/**
 * Asserts the page's transcript is inert: no markup or event handler from a
 * run's text, no control character left in it.
 */
export async function assertTranscriptInert(page: Page): Promise<void> {
  const live = await page.$eval("#transcript", (root) => ({
    markup: root.querySelectorAll("script, img, iframe, b, i").length,
    handlers: [...root.querySelectorAll("*")].flatMap((n) =>
      [...n.attributes].map((a) => a.name).filter((a) => a.startsWith("on"))
    ),
    escapes: [...root.textContent!].some((c) => {
      const code = c.charCodeAt(0);
      return (code < 32 && code !== 9 && code !== 10) || code === 127;
    }),
  }));
  assert.deepEqual(live, { markup: 0, handlers: [], escapes: false });
}

/**
 * Completes a run of `conversation` (`stream: false`) on the console tests'
 * server at `url` whose fixture agent stays warm with a grandchild, its pids
 * in `pidFile`.
 */
export async function warmRun(
  url: string,
  conversation: string,
  pidFile: string,
): Promise<void> {
  const response = await postJson(`${url}/v1/runs`, {
    conversation_id: conversation,
    input: { text: "hello" },
    config: {
      provider: "custom",
      workspace: tempDir(),
      "acp-command": fixtureCommand("--grandchild", "--pid-file", pidFile),
    },
    stream: false,
  }, { authorization: `Bearer ${TOKEN}` });
  assert.equal(response.status, 200);
  assert.equal((await response.json()).status, "completed");
}

/** A run {@linkcode dataDirWithEndedRun} stores. */
export interface EndedRun {
  runId: string;
  conversationId: string;
  prompt: string;
  /** How it ended. */
  status: RunOutcome["status"];
  /** Its events; their run id, sequence and time are filled in. */
  events: Omit<RunEvent, "run_id">[];
}

/** A fresh data dir whose store holds `run` (of the custom provider), ended. */
export async function dataDirWithEndedRun(run: EndedRun): Promise<string> {
  const dataDir = join(tempDir(), "data");
  const store = await openStore({ dataDir });
  try {
    await store.createRun({
      runId: run.runId,
      conversationId: run.conversationId,
      config: { provider: "custom" },
      prompt: run.prompt,
      status: "active",
    });
    run.events.forEach((event, index) =>
      store.appendEvent(run.runId, {
        ...event,
        run_id: run.runId,
        sequence: index + 1,
        timestamp: Date.now(),
      })
    );
    await store.flush();
    await store.finishRun(run.runId, { status: run.status });
  } finally {
    await store.close();
  }
  return dataDir;
}

/** What a page's intercepted request is answered with when the store is down: 503 `store.unavailable`. */
export const STORE_UNAVAILABLE = {
  status: 503,
  contentType: "application/json",
  body: JSON.stringify({
    error: {
      code: "store.unavailable",
      message: "The store did not answer.",
      retryable: true,
    },
  }),
};
