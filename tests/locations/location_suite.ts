/**
 * The location case suite every location passes, the way
 * `tests/store_suite.ts` runs the same cases against both stores: one
 * terminal event, cancel mid-turn, the timeout (one message everywhere), a
 * follow-up, a permission ask, redaction and no process left, each run
 * through a real run manager and store with the fixture agent at local,
 * remote-ssh (a real sshd) and daemon (a real hub and `runner daemon`).
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { createReaperRegistry } from "../../lib/agent/reaper.ts";
import { RunnerError } from "../../lib/errors.ts";
import type { RunEvent } from "../../lib/events.ts";
import type { AgentLocation } from "../../lib/run/location.ts";
import { runnerLocations } from "../../lib/locations/runner_locations.ts";
import { createRunManager, type RunManager } from "../../lib/run/manager.ts";
import {
  EventLog,
  fixtureConfig,
  makeGate,
  runToEnd,
} from "../engine_helpers.ts";
import {
  agentPids,
  isAlive,
  openStoreNow,
  pathExists,
  tempDir,
} from "../helpers.ts";

/** How the suite reaches one location. */
export interface LocationUnderTest {
  /** A name for test titles (`local`, `remote-ssh`, `daemon`). */
  name: string;
  /** Starts what the location needs (sshd, hub and daemon) and a run manager on it. */
  open(): Promise<OpenLocation>;
  /** Skips the suite (e.g. no sshd installed). */
  ignore?: boolean;
}

/** A run manager whose runs go to the location under test. */
export interface OpenLocation {
  /** The manager (real store). */
  manager: RunManager;
  /** The run-config keys that send a run to the location. */
  config: Record<string, unknown>;
  /** Ends the runs still active and stops what `open` started. */
  close(): Promise<void>;
}

/** Options for {@linkcode openManager}. */
export interface OpenManagerOptions {
  /** The run-config keys that send a run to the location. */
  config: Record<string, unknown>;
  /** The `daemon` location, if the manager has one. */
  daemon?: AgentLocation;
  /** Stops what the location started, after the manager's runs are ended. */
  after?: () => Promise<void>;
}

/** A run manager with the runner's locations over a fresh store, as the suite opens it. */
export function openManager(options: OpenManagerOptions): OpenLocation {
  const dataDir = tempDir();
  const store = openStoreNow(dataDir);
  const manager = createRunManager({
    store,
    locations: runnerLocations(options.daemon),
    registry: createReaperRegistry(join(dataDir, "agents")),
  });
  return {
    manager,
    config: options.config,
    async close() {
      await manager.shutdown(
        new RunnerError("runner.shutting_down", "The test ended."),
      );
      await options.after?.();
      await store.close();
    },
  };
}

/** One case of the suite. */
interface LocationCase {
  name: string;
  run(location: OpenLocation): Promise<void>;
}

/** A fixture-agent run config at the location, with `extra` keys. */
function configAt(
  location: OpenLocation,
  flags: string[],
  extra: Record<string, unknown> = {},
) {
  return fixtureConfig(flags, { ...location.config, ...extra });
}

function terminalsOf(events: RunEvent[]): RunEvent[] {
  return events.filter((event) =>
    event.type === "run.completed" || event.type === "run.failed"
  );
}

/** Exactly one terminal event, the last one, and sequences 1, 2, 3, … */
function assertOneTerminalLast(log: EventLog): RunEvent {
  const terminals = terminalsOf(log.events);
  assert.equal(terminals.length, 1, JSON.stringify(terminals));
  assert.equal(log.events.at(-1), terminals[0]);
  assert.deepEqual(
    log.events.map((event) => event.sequence),
    log.events.map((_, index) => index + 1),
  );
  return terminals[0];
}

/** Fails unless the agent, its grandchild and that one's child are all gone. */
function assertNoProcessLeft(pidFile: string): void {
  const left = agentPids(pidFile).filter(isAlive);
  assert.deepEqual(left, [], `agent processes outlived the run: ${left}`);
}

/** Flags that make the agent stall in its prompt after one delta, with a SIGTERM-ignoring grandchild. */
function stallFlags(pidFile: string): string[] {
  return ["--stall-prompt", "--grandchild", "--pid-file", pidFile];
}

const CASES: LocationCase[] = [
  {
    name:
      "a run ends with exactly one terminal event, the last, sequences from 1",
    async run(location) {
      const { log, result } = await runToEnd(location.manager, {
        input: { text: "hello" },
        config: configAt(location, ["--chunks", "3"]),
      });
      assert.equal(result.status, "completed");
      assert.equal(assertOneTerminalLast(log).type, "run.completed");
      assert.deepEqual(log.messages(), ["echo: hello (turn 1)"]);
    },
  },
  {
    name:
      "cancel mid-turn ends the run as run.cancelled, and no agent process is left",
    async run(location) {
      const pidFile = join(tempDir(), "pids.json");
      const { run } = await location.manager.start({
        input: { text: "wait" },
        config: configAt(location, stallFlags(pidFile)),
      });
      const log = new EventLog(run);
      await log.waitFor((event) => event.type === "message.delta");
      run.handle.cancel();
      const result = await run.done;
      assert.equal(result.status, "cancelled");
      const terminal = assertOneTerminalLast(log);
      assert.deepEqual(
        [terminal.type, terminal.data.code, terminal.data.retryable],
        ["run.failed", "run.cancelled", false],
      );
      assertNoProcessLeft(pidFile);
    },
  },
  {
    name:
      "the timeout ends the run with one message on every location, and no agent process is left",
    async run(location) {
      // On a loaded machine the agent may not have started within a short
      // timeout: then the run is tried again with a longer one.
      for (let timeout = 2;; timeout *= 2) {
        const pidFile = join(tempDir(), "pids.json");
        const { log, result } = await runToEnd(location.manager, {
          input: { text: "wait" },
          config: configAt(location, stallFlags(pidFile), { timeout }),
        });
        assert.deepEqual([result.status, result.code], [
          "failed",
          "run.timeout",
        ]);
        const terminal = assertOneTerminalLast(log);
        assert.deepEqual(terminal.data, {
          error:
            `The run exceeded its timeout of ${timeout} s. Raise timeout, or split the task.`,
          code: "run.timeout",
          retryable: true,
        });
        if (!pathExists(pidFile) && timeout < 64) continue;
        assertNoProcessLeft(pidFile);
        return;
      }
    },
  },
  {
    name:
      "a follow-up runs as the run's next turn: turn.started, both answers, one run.completed",
    async run(location) {
      const gate = await makeGate();
      const config = configAt(location, ["--gate-fifo", gate.path]);
      const first = await location.manager.start({
        conversationId: `follow-up-${crypto.randomUUID()}`,
        input: { text: "first" },
        config,
      });
      const log = new EventLog(first.run);
      const second = await location.manager.start({
        conversationId: first.run.conversationId,
        input: { text: "second" },
        config,
      });
      assert.equal(second.kind, "steered");
      assert.equal(second.run, first.run);
      // Each turn's prompt waits for one line of the gate.
      await gate.release();
      await gate.release();
      const result = await first.run.done;
      assert.equal(result.status, "completed");
      assertOneTerminalLast(log);
      assert.deepEqual(log.ofType("turn.started").map((event) => event.data), [
        { turn: 2, input: { text: "second" } },
      ]);
      assert.deepEqual(log.messages(), [
        "echo: first (turn 1)",
        "echo: second (turn 2)",
      ]);
    },
  },
  {
    name: "a permission ask waits for a person's answer, which the agent gets",
    async run(location) {
      const { run } = await location.manager.start({
        input: { text: "write the file" },
        config: configAt(location, ["--permission"], {
          "permission-decision": "ask",
        }),
      });
      const log = new EventLog(run);
      const asked = await log.waitFor((event) =>
        event.type === "permission.requested"
      );
      const options = asked.data.options as { option_id: string }[];
      const allow =
        options.find((option) => option.option_id.startsWith("allow")) ??
          options[0];
      const requestId = String(asked.data.request_id);
      assert.equal(
        run.handle.answerPermission(requestId, { option_id: allow.option_id }),
        "answered",
      );
      assert.equal(
        run.handle.answerPermission(requestId, { option_id: allow.option_id }),
        "already_answered",
      );
      const result = await run.done;
      assert.equal(result.status, "completed");
      assertOneTerminalLast(log);
      const decided = log.ofType("permission.decided");
      assert.equal(decided.length, 1);
      assert.equal(decided[0].data.request_id, requestId);
      assert.equal(decided[0].data.option_id, allow.option_id);
      assert.deepEqual(log.ofType("permission.unavailable"), []);
    },
  },
  {
    name:
      "a secret of the run's environment never reaches its events, its follow-up or its failure",
    async run(location) {
      const secret = `suite-secret-${crypto.randomUUID()}`;
      const gate = await makeGate();
      const config = configAt(location, [
        "--gate-fifo",
        gate.path,
        "--exit-on-prompt",
        "crash now",
      ], { "env-json": { SUITE_API_KEY: secret } });
      const conversationId = `secret-${crypto.randomUUID()}`;
      const { run } = await location.manager.start({
        conversationId,
        input: { text: `say ${secret}` },
        config,
      });
      const log = new EventLog(run);
      for (const text of [`crash now ${secret}`, `and ${secret} again`]) {
        const steered = await location.manager.start({
          conversationId,
          input: { text },
          config,
        });
        assert.equal(steered.kind, "steered");
      }
      // The first turn answers; the second crashes the agent at its prompt.
      await gate.release();
      const result = await run.done;
      assert.equal(result.status, "failed");
      const terminal = assertOneTerminalLast(log);
      assert.equal(terminal.type, "run.failed");
      const text = JSON.stringify(log.events);
      assert.ok(!text.includes(secret), text);
      assert.ok(text.includes("[REDACTED]"), text);
      // The follow-up the run could not take goes back, redacted.
      assert.deepEqual(terminal.data.unprocessed_inputs, [
        { text: "and [REDACTED] again" },
      ]);
    },
  },
  {
    name:
      "no agent process is left after a completed run that keeps no warm agent",
    async run(location) {
      const pidFile = join(tempDir(), "pids.json");
      const { log, result } = await runToEnd(location.manager, {
        input: { text: "hi" },
        config: configAt(location, ["--grandchild", "--pid-file", pidFile], {
          "reuse-session": false,
        }),
      });
      assert.equal(result.status, "completed");
      assertOneTerminalLast(log);
      assertNoProcessLeft(pidFile);
    },
  },
];

/** Registers the suite's cases against `location`, sharing one opened location. */
export function locationSuite(location: LocationUnderTest): void {
  Deno.test({
    name: `${location.name}: the shared location cases`,
    ignore: location.ignore,
    async fn(t) {
      const open = await location.open();
      try {
        for (const testCase of CASES) {
          await t.step(testCase.name, () => testCase.run(open));
        }
      } finally {
        await open.close();
      }
    },
  });
}
