/**
 * Failures an agent (or the runner itself) can cause mid-run, each with its
 * stable code, `retryable` from the catalogue, one `run.failed` and no agent
 * process left: a refusal, a session or prompt the agent answers with an
 * error, and a data directory the runner cannot record the agent in.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { ERROR_CODES, type ErrorCode } from "../../lib/errors.ts";
import type { RunEvent } from "../../lib/events.ts";
import { EventLog, grandchildConfig, harness } from "../engine_helpers.ts";
import { assertAgentGone } from "../helpers.ts";

/** Runs the fixture with `flags` and returns its events and stored status. */
async function runFixture(
  flags: string[],
  prepare?: (dataDir: string) => void,
): Promise<{ events: RunEvent[]; stored?: string; pidFile: string }> {
  const h = harness();
  try {
    prepare?.(h.dataDir);
    const { config, pidFile } = grandchildConfig(flags);
    const { run } = await h.manager.start({ input: { text: "hi" }, config });
    const log = new EventLog(run);
    await run.done;
    return {
      events: log.events,
      stored: (await h.store.getRun(run.runId))?.status,
      pidFile,
    };
  } finally {
    await h.close();
  }
}

/** Asserts one terminal event, `run.failed` with `code` and the catalogue's `retryable`. */
function assertFailedWith(events: RunEvent[], code: ErrorCode): RunEvent {
  const terminal = events.filter((event) =>
    event.type === "run.failed" || event.type === "run.completed"
  );
  assert.equal(terminal.length, 1, JSON.stringify(terminal));
  assert.equal(events.at(-1), terminal[0], "nothing follows the terminal");
  const [failed] = terminal;
  assert.equal(failed.type, "run.failed");
  assert.equal(failed.data.code, code);
  assert.equal(failed.data.retryable, ERROR_CODES[code].retryable);
  return failed;
}

Deno.test("stop reason refusal fails the run with acp.refused, even with text", async () => {
  const { events, stored, pidFile } = await runFixture([
    "--text",
    "'I will not do that'",
    "--stop-reason",
    "refusal",
  ]);
  const failed = assertFailedWith(events, "acp.refused");
  assert.match(String(failed.data.error), /refused.*Rephrase the request/);
  assert.equal(stored, "failed");
  assertAgentGone(pidFile);
});

const ANSWERED_WITH_ERROR: {
  method: string;
  flag: string;
  code: ErrorCode;
  noDeltas: boolean;
}[] = [
  {
    method: "session/new",
    flag: "--fail-session-new",
    code: "acp.session_failed",
    // No session, so no turn: nothing of an answer either.
    noDeltas: true,
  },
  {
    method: "session/prompt",
    flag: "--fail-prompt",
    code: "acp.prompt_failed",
    noDeltas: false,
  },
];

for (const { method, flag, code, noDeltas } of ANSWERED_WITH_ERROR) {
  Deno.test(`an agent that answers ${method} with an error fails the run with ${code}`, async () => {
    const { events, stored, pidFile } = await runFixture([flag]);
    const failed = assertFailedWith(events, code);
    assert.match(
      String(failed.data.error),
      new RegExp(`${method} with error -32603: Internal error`),
    );
    if (noDeltas) {
      assert.equal(events.filter((e) => e.type === "message.delta").length, 0);
    }
    assert.equal(stored, "failed");
    assertAgentGone(pidFile);
  });
}

Deno.test("an agent the runner cannot record for the reaper is killed and the run fails with runner.internal", async () => {
  const { events, stored, pidFile } = await runFixture([
    "--text",
    "never",
  ], (dir) => {
    // The registry's directory turns into a file: its records cannot be written.
    const agents = join(dir, "agents");
    Deno.removeSync(agents, { recursive: true });
    Deno.writeTextFileSync(agents, "not a directory");
  });
  const failed = assertFailedWith(events, "runner.internal");
  assert.match(
    String(failed.data.error),
    /Could not record the agent's process group.*data directory is writable/,
  );
  assert.equal(events.filter((e) => e.type === "message.delta").length, 0);
  assert.equal(stored, "failed");
  // The agent's group was SIGKILLed at once, most likely before the agent
  // wrote its pid file; if it did write it, nothing of the group is left.
  try {
    Deno.statSync(pidFile);
  } catch {
    return;
  }
  assertAgentGone(pidFile);
});
