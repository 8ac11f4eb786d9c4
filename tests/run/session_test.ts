import assert from "node:assert/strict";
import { join } from "node:path";
import { sessionKeyOf } from "../../lib/run/manager.ts";
import { prepareAgentCommand } from "../../lib/providers.ts";
import { EventLog, fixtureConfig, harness } from "../engine_helpers.ts";
import {
  conversationRunArgs,
  parseJsonLines,
  readRecord,
  runCli,
  tempDir,
} from "../helpers.ts";

/** The ACP methods the fixture agent's processes received, in order. */
function recordedMethods(record: string): string[] {
  return readRecord(record).flatMap((entry) =>
    typeof entry.method === "string" ? [entry.method] : []
  );
}

function cliRun(
  flags: string[],
  dataDir: string,
  workspace: string,
  text: string,
  extra: string[] = [],
) {
  return runCli(
    conversationRunArgs(
      { fixtureFlags: flags, dataDir, workspace },
      text,
      extra,
    ),
  );
}

/** The ACP session id a `runner run --json` output's `state.updated` names. */
function sessionIdOf(stdout: string): string {
  const state = parseJsonLines(stdout).find((e) => e.type === "state.updated")!;
  return (state.data as { value: string }).value;
}

function messageOf(stdout: string): string {
  const last = parseJsonLines(stdout).findLast((event) =>
    event.type === "message.completed"
  )!;
  return (last.data as { message: { content: string } }).message.content;
}

/**
 * Two `runner run` turns of one conversation in one data dir and workspace,
 * each asserted to exit 0.
 */
async function twoRuns(flags: string[], texts: [string, string]) {
  const dataDir = tempDir();
  const workspace = tempDir();
  const first = await cliRun(flags, dataDir, workspace, texts[0]);
  assert.equal(first.code, 0, first.stderr);
  const second = await cliRun(flags, dataDir, workspace, texts[1]);
  assert.equal(second.code, 0, second.stderr);
  return { first, second };
}

Deno.test("a second run of a conversation resumes the first's session in a new process, preferring session/resume over session/load", async () => {
  const record = join(tempDir(), "record.jsonl");
  const { first, second } = await twoRuns(
    [
      "--resume",
      "--load-session",
      "--state-dir",
      tempDir(),
      "--record",
      record,
    ],
    ["one", "two"],
  );
  assert.equal(messageOf(first.stdout), "echo: one (turn 1)");
  assert.equal(messageOf(second.stdout), "echo: two (turn 2)");
  assert.ok(
    !second.stdout.includes('"state.updated"'),
    "same session: no new state.updated",
  );
  const sessionMethods = recordedMethods(record)
    .filter((method) => method.startsWith("session/"))
    .filter((method) => method !== "session/prompt");
  assert.deepEqual(sessionMethods, ["session/new", "session/resume"]);
});

Deno.test("with a load-only agent the replayed history never appears in the output", async () => {
  const record = join(tempDir(), "record.jsonl");
  const { second } = await twoRuns(
    ["--load-session", "--state-dir", tempDir(), "--record", record],
    ["alpha", "beta"],
  );
  assert.equal(messageOf(second.stdout), "echo: beta (turn 2)");
  assert.ok(
    !second.stdout.includes("alpha"),
    "replayed history leaked into the output",
  );
  assert.ok(recordedMethods(record).includes("session/load"));
});

Deno.test("a stored id the agent no longer knows gives a fresh session; with create-session-if-missing=false a clear failure", async () => {
  const dataDir = tempDir();
  const workspace = tempDir();
  const state = tempDir();
  const forget = () => {
    for (const entry of Deno.readDirSync(state)) {
      Deno.removeSync(join(state, entry.name));
    }
  };
  const flags = ["--resume", "--state-dir", state];
  const first = await cliRun(flags, dataDir, workspace, "one");
  assert.equal(first.code, 0, first.stderr);
  forget();
  const second = await cliRun(flags, dataDir, workspace, "two");
  assert.equal(second.code, 0, second.stderr);
  assert.equal(messageOf(second.stdout), "echo: two (turn 1)");
  const ids = [first, second].map((r) => sessionIdOf(r.stdout));
  assert.notEqual(ids[0], ids[1]);
  forget();
  const third = await cliRun(flags, dataDir, workspace, "three", [
    "--create-session-if-missing",
    "false",
  ]);
  assert.equal(third.code, 1);
  const failed = parseJsonLines(third.stdout).at(-1)!;
  assert.equal((failed.data as { code: string }).code, "acp.session_missing");
  assert.match(
    String((failed.data as { error: string }).error),
    /create-session-if-missing=true/,
  );
});

Deno.test("create-session-if-missing=false without a stored session fails with acp.session_missing before any session is made", async () => {
  const record = join(tempDir(), "record.jsonl");
  const flags = ["--resume", "--state-dir", tempDir(), "--record", record];
  const result = await cliRun(flags, tempDir(), tempDir(), "hello", [
    "--create-session-if-missing",
    "false",
  ]);
  assert.equal(result.code, 1, result.stderr);
  const events = parseJsonLines(result.stdout);
  // The agent was started (cold) and initialized; no session was made.
  assert.deepEqual(events.map((event) => event.type), [
    "run.started",
    "run.failed",
  ]);
  const data = events[1].data as { code: string; error: string };
  assert.equal(data.code, "acp.session_missing");
  assert.match(data.error, /no stored session to continue/);
  assert.deepEqual(recordedMethods(record), ["initialize"]);
});

Deno.test("reuse-session=false always starts fresh", async () => {
  const dataDir = tempDir();
  const workspace = tempDir();
  const flags = ["--resume", "--state-dir", tempDir()];
  const first = await cliRun(flags, dataDir, workspace, "one");
  assert.equal(first.code, 0, first.stderr);
  assert.equal(messageOf(first.stdout), "echo: one (turn 1)");
  const second = await cliRun(flags, dataDir, workspace, "two", [
    "--reuse-session",
    "false",
  ]);
  assert.equal(second.code, 0, second.stderr);
  assert.equal(messageOf(second.stdout), "echo: two (turn 1)");
  const ids = [first, second].map((r) => sessionIdOf(r.stdout));
  assert.notEqual(ids[0], ids[1]);
});

Deno.test("a crash mid-turn fails with the stderr tail and keeps the session mapping", async () => {
  const h = harness();
  try {
    const config = fixtureConfig(["--exit-mid-prompt", "--resume"]);
    const { run } = await h.manager.start({
      conversationId: "crash",
      input: { text: "hi" },
      config,
    });
    const log = new EventLog(run);
    await run.done;
    const failed = log.events.at(-1)!;
    assert.equal(failed.type, "run.failed");
    assert.equal(failed.data.code, "acp.process_exited");
    assert.match(String(failed.data.stderr_tail), /fixture crashing/);
    const key = sessionKeyOf(
      "crash",
      config,
      prepareAgentCommand(config).sessionCommand!,
    );
    const stored = await h.store.getSession(key);
    const state = log.ofType("state.updated")[0];
    assert.equal(stored?.sessionId, state.data.value);
    assert.equal((await h.store.getRun(run.runId))?.status, "failed");
  } finally {
    await h.close();
  }
});

Deno.test("an agent that answers session/load mid-replay leaks nothing of the old turn into the new one", async () => {
  const dataDir = tempDir();
  const workspace = tempDir();
  // gemini-cli: the load answer comes halfway through the replay.
  const flags = [
    "--load-session",
    "--replay-after-load",
    "--state-dir",
    tempDir(),
  ];
  const first = await cliRun(flags, dataDir, workspace, "alpha");
  assert.equal(first.code, 0, first.stderr);
  const second = await cliRun(flags, dataDir, workspace, "beta");
  assert.equal(second.code, 0, second.stderr);
  assert.equal(messageOf(second.stdout), "echo: beta (turn 2)");
  const events = parseJsonLines(second.stdout);
  assert.deepEqual(
    events.filter((event) => event.type === "agent.update"),
    [],
    "replayed updates shown",
  );
  assert.ok(!second.stdout.includes("alpha"), "the old turn leaked");
  const human = await runCli(conversationRunArgs(
    { fixtureFlags: flags, dataDir, workspace, plainText: true },
    "gamma",
  ));
  assert.equal(human.code, 0, human.stderr);
  assert.equal(human.stdout, "echo: gamma (turn 3)\n");
});
