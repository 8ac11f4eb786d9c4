/**
 * Helpers for in-process run tests: a real store and run manager, real
 * fixture processes, and FIFO gates.
 *
 * @module
 */

import { runnerLocations } from "../lib/locations/runner_locations.ts";
import { join } from "node:path";
import { createAssetsHook } from "../lib/assets/wiring.ts";
import { parseRunConfig } from "../lib/config.ts";
import { RunnerError } from "../lib/errors.ts";
import type { RunEvent } from "../lib/events.ts";
import { createReaperRegistry } from "../lib/agent/reaper.ts";
import {
  createRunManager,
  type ManagedRun,
  type RunManager,
} from "../lib/run/manager.ts";
import assert from "node:assert/strict";
import { type RunStore } from "../lib/store/types.ts";
import { openStoreNow } from "./helpers.ts";
import { agentCommand, plainEnvironment, tempDir } from "./helpers.ts";

/** A manager over a fresh data directory. */
export interface Harness {
  manager: RunManager;
  store: RunStore;
  dataDir: string;
  close(): Promise<void>;
}

/** Options for {@linkcode harness}. */
export interface HarnessOptions {
  /** Receives the manager's and the runs' log lines. */
  log?: (entry: Record<string, unknown>) => void;
  /** The environment the runs see (secrets are found in it by name). */
  environment?: Record<string, string>;
  /**
   * Called as a run emits each event, at its append to the store (listeners
   * get it only once it is committed, a commit later).
   */
  onAppend?: (event: RunEvent) => void;
}

/** Makes a run manager with a real SQLite store in a temp directory; `close` ends runs still active. */
export function harness(options: HarnessOptions = {}): Harness {
  const dataDir = tempDir();
  const store = openStoreNow(dataDir);
  const { onAppend } = options;
  const appending: RunStore = onAppend
    ? {
      ...store,
      appendEvent(runId, event) {
        const stored = store.appendEvent(runId, event);
        onAppend(stored);
        return stored;
      },
    }
    : store;
  const assets = createAssetsHook({ log: () => {} });
  const manager = createRunManager({
    locations: runnerLocations(),
    assets,
    store: appending,
    registry: createReaperRegistry(join(dataDir, "agents")),
    environment: options.environment ?? plainEnvironment(),
    log: options.log,
  });
  return {
    manager,
    store,
    dataDir,
    async close() {
      // A test that failed midway may leave runs active: end them (and their
      // agents) so nothing outlives the test.
      await manager.shutdown(
        new RunnerError("runner.shutting_down", "The test ended."),
      );
      await assets.close();
      await store.close();
    },
  };
}

/**
 * Runs `body` with a fresh {@linkcode harness} (made with `options`), closing
 * it after, whether `body` passed or threw; returns what `body` returned.
 */
export async function withHarness<T>(
  body: (h: Harness) => Promise<T>,
): Promise<T>;
export async function withHarness<T>(
  options: HarnessOptions,
  body: (h: Harness) => Promise<T>,
): Promise<T>;
export async function withHarness<T>(
  first: HarnessOptions | ((h: Harness) => Promise<T>),
  second?: (h: Harness) => Promise<T>,
): Promise<T> {
  const [options, body] = typeof first === "function"
    ? [{}, first]
    : [first, second!];
  const h = harness(options);
  try {
    return await body(h);
  } finally {
    await h.close();
  }
}

/** A run config for the fixture agent with the given flags. */
export function fixtureConfig(
  flags: string[],
  extra: Record<string, unknown> = {},
) {
  return parseRunConfig({
    provider: "custom",
    "acp-command": agentCommand(flags),
    workspace: tempDir(),
    ...extra,
  });
}

/** Collects a run's events and resolves helpers on them. */
export class EventLog {
  events: RunEvent[] = [];
  #waiters: Array<{
    test: (e: RunEvent) => boolean;
    resolve: (e: RunEvent) => void;
    reject: (error: Error) => void;
  }> = [];

  constructor(run: ManagedRun) {
    run.subscribe((event) => {
      this.events.push(event);
      const terminal = event.type === "run.completed" ||
        event.type === "run.failed";
      this.#waiters = this.#waiters.filter((waiter) => {
        if (waiter.test(event)) waiter.resolve(event);
        else if (terminal) {
          waiter.reject(
            new Error(
              `run ended before the awaited event: ${JSON.stringify(event)}`,
            ),
          );
        } else return true;
        return false;
      });
    });
  }

  /** Resolves with the first (past or future) event matching `test`; rejects if the run ends first. */
  waitFor(test: (event: RunEvent) => boolean): Promise<RunEvent> {
    const found = this.events.find(test);
    if (found) return Promise.resolve(found);
    const ended = this.events.find((e) =>
      e.type === "run.completed" || e.type === "run.failed"
    );
    if (ended) {
      return Promise.reject(
        new Error(`run already ended: ${JSON.stringify(ended)}`),
      );
    }
    return new Promise((resolve, reject) =>
      this.#waiters.push({ test, resolve, reject })
    );
  }

  /** Events of a type. */
  ofType(type: string): RunEvent[] {
    return this.events.filter((event) => event.type === type);
  }

  /** The message texts of each completed turn. */
  messages(): string[] {
    return this.events
      .filter((event) => event.type === "message.completed")
      .map((event) => (event.data.message as { content: string }).content);
  }
}

/** A named pipe the fixture reads one line from before answering each prompt. */
export async function makeGate(): Promise<
  { path: string; release(): Promise<void> }
> {
  const path = join(tempDir(), "gate");
  const made = await new Deno.Command("mkfifo", { args: [path] }).output();
  if (!made.success) throw new Error("mkfifo failed");
  return {
    path,
    async release() {
      const file = await Deno.open(path, { write: true });
      await file.write(new TextEncoder().encode("go\n"));
      file.close();
    },
  };
}

/** A run started by {@linkcode runToEnd}, its events and its result. */
export interface EndedRun {
  run: ManagedRun;
  log: EventLog;
  result: Awaited<ManagedRun["done"]>;
}

/**
 * Starts a run on `manager`, records its events, lets `meanwhile` act on it
 * while it runs, and waits for its end.
 */
async function runLogged(
  manager: RunManager,
  request: Parameters<RunManager["start"]>[0],
  meanwhile: (run: ManagedRun, log: EventLog) => Promise<void> = () =>
    Promise.resolve(),
): Promise<EndedRun> {
  const { run } = await manager.start(request);
  const log = new EventLog(run);
  await meanwhile(run, log);
  return { run, log, result: await run.done };
}

/** Starts a run on `manager`, records its events, and waits for its end. */
export function runToEnd(
  manager: RunManager,
  request: Parameters<RunManager["start"]>[0],
): Promise<EndedRun> {
  return runLogged(manager, request);
}

/**
 * Starts a run on `manager`, records its events, cancels it once the agent's
 * first delta arrived (mid-turn) and waits for its end.
 */
export function cancelAfterFirstDelta(
  manager: RunManager,
  request: Parameters<RunManager["start"]>[0],
): Promise<EndedRun> {
  return runLogged(manager, request, async (run, log) => {
    await log.waitFor((e) => e.type === "message.delta");
    run.handle.cancel();
  });
}

/**
 * Fixture flags of an agent that stalls its turn, ignores a cancel and leaves
 * a grandchild, its pids in `pidFile`: only a kill ends it.
 */
export function stubbornAgentFlags(pidFile: string): string[] {
  return [
    "--stall-prompt",
    "--ignore-cancel",
    "--grandchild",
    "--pid-file",
    pidFile,
  ];
}

/**
 * The run config of the fixture agent with `flags` that also leaves a
 * grandchild, with the fresh `--pid-file` its pids go to.
 */
export function grandchildConfig(
  flags: string[],
): { config: ReturnType<typeof fixtureConfig>; pidFile: string } {
  const pidFile = join(tempDir(), "pids.json");
  return {
    config: fixtureConfig([...flags, "--grandchild", "--pid-file", pidFile]),
    pidFile,
  };
}

/** Asserts the run's last event is `run.failed` with `code`; returns it. */
export function assertFailedWith(log: EventLog, code: string): RunEvent {
  const failed = log.events.at(-1)!;
  assert.equal(failed.type, "run.failed", JSON.stringify(failed));
  assert.equal(failed.data.code, code, JSON.stringify(failed));
  return failed;
}

/** Runs `request` to its end and asserts it completed (its last event shown otherwise); its events. */
export async function runCompleted(
  manager: RunManager,
  request: Parameters<RunManager["start"]>[0],
): Promise<EventLog> {
  const { log, result } = await runToEnd(manager, request);
  assert.equal(result.status, "completed", JSON.stringify(log.events.at(-1)));
  return log;
}
