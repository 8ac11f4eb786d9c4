/**
 * Runs against the fixture agent behaving like real third-party agents do:
 * tool input only in a later update (claude), a turn ended after a rejected
 * permission (cancelled, or end_turn with no text), a failed tool, death
 * during initialize.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { quoteCommand } from "../../lib/agent/shell_words.ts";
import {
  cancelAfterFirstDelta,
  grandchildConfig,
  withHarness,
} from "../engine_helpers.ts";
import {
  assertAgentGone,
  conversationRunArgs,
  fixtureCommand,
  fixtureRunArgs,
  parseJsonLines,
  runCli,
  tempDir,
} from "../helpers.ts";

function dataOf(events: Record<string, unknown>[], type: string) {
  return events.filter((event) => event.type === type).map((event) =>
    event.data as Record<string, unknown>
  );
}

Deno.test("a tool call's input that arrives in a later tool_call_update is carried in tool.call.updated", async () => {
  const result = await runCli(
    fixtureRunArgs(
      ["--text", "done", "--tool-input-late"],
      "--json",
      "list files",
    ),
  );
  assert.equal(result.code, 0, result.stderr);
  const events = parseJsonLines(result.stdout);
  assert.deepEqual(dataOf(events, "tool.call.started"), [{
    tool_call_id: "tc-late",
    tool_name: "Terminal",
    parameters: {},
    kind: "execute",
    status: "pending",
  }]);
  assert.deepEqual(dataOf(events, "tool.call.updated"), [{
    tool_call_id: "tc-late",
    status: null,
    parameters: { command: "ls -la", description: "List files" },
    tool_name: "`ls -la`",
    kind: "execute",
    locations: [{ path: "/work/project" }],
  }]);
  assert.deepEqual(dataOf(events, "tool.call.completed"), [{
    tool_call_id: "tc-late",
    tool_name: "`ls -la`",
    result: { stdout: "total 0" },
  }]);
});

/** The last event of a `--json` run, which must be its one `run.failed`. */
/**
 * `runner run --json` of "write the file" with the fixture's `flags`, its
 * permission requests rejected once; asserts exit 3 and returns the first
 * `permission.decided` and the `run.failed` data.
 */
async function rejectedWrite(flags: string[]) {
  const result = await runCli(
    fixtureRunArgs(
      flags,
      ...["--permission-decision", "reject_once", "--json", "write the file"],
    ),
  );
  assert.equal(result.code, 3, result.stderr);
  const events = parseJsonLines(result.stdout);
  return {
    decided: dataOf(events, "permission.decided")[0],
    data: failureOf(result.stdout),
  };
}

function failureOf(stdout: string) {
  const events = parseJsonLines(stdout);
  const failed = events.at(-1)!;
  assert.equal(failed.type, "run.failed");
  assert.equal(events.filter((event) => event.type === "run.failed").length, 1);
  return failed.data as { code: string; error: string; retryable: boolean };
}

// Each way an agent ends a turn after the tool it asked for was refused:
// claude and codex end it `cancelled`; opencode, qwen-code and kilo end it
// `end_turn` with no text, some after marking the tool call failed.
const AFTER_REJECTION: Array<{ agent: string; flags: string[] }> = [
  { agent: "cancelled", flags: ["--cancel-on-reject"] },
  { agent: "end_turn, no text", flags: ["--silent-on-reject"] },
  {
    agent: "max_tokens, no text",
    flags: ["--silent-on-reject", "--stop-reason", "max_tokens"],
  },
  {
    agent: "the refused tool call failed, then end_turn",
    flags: ["--fail-tool-on-reject", "--silent-on-reject"],
  },
  {
    agent: "the refused tool call failed, then cancelled",
    flags: ["--fail-tool-on-reject", "--cancel-on-reject"],
  },
];

for (const { agent, flags } of AFTER_REJECTION) {
  Deno.test(`a turn that ends (${agent}) after a rejected permission is run.permission_rejected, not retryable, exit 3`, async () => {
    const { decided, data } = await rejectedWrite(["--permission", ...flags]);
    assert.equal(decided.kind, "reject_once");
    assert.equal(data.code, "run.permission_rejected");
    assert.equal(data.retryable, false);
    assert.match(data.error, /"Write file" was refused \(reject_once\)/);
    assert.match(data.error, /permission-decision=allow_once/);
  });
}

Deno.test("a rejection by the ask fallback (no terminal) is run.permission_rejected too, with the error line", async () => {
  const human = await runCli(
    fixtureRunArgs(
      ["--permission", "--silent-on-reject"],
      "--permission-decision",
      "ask",
      "--permission-fallback",
      "reject_always",
      "write the file",
    ),
  );
  assert.equal(human.code, 3, human.stderr);
  assert.equal(human.stdout, "");
  assert.match(
    human.stderr,
    /^error \[run\.permission_rejected\]: .*"Write file" was refused \(reject_always\)/m,
  );
  assert.doesNotMatch(human.stderr, /login/);
});

Deno.test("a request answered cancelled (no reject option offered) is a rejection too", async () => {
  const { decided, data } = await rejectedWrite([
    "--permission",
    ...["--permission-options", "allow_once,allow_always"],
    "--silent-on-reject",
  ]);
  assert.equal(decided.decision, "cancelled");
  assert.equal(data.code, "run.permission_rejected");
  assert.match(data.error, /"Write file" was refused \(cancelled\)/);
});

/** Fixture flags for a `--script` turn. */
function scripted(steps: string[][]): string[] {
  return ["--script", quoteCommand([JSON.stringify(steps)])];
}

/**
 * `runner run --json` of a `--script` turn with `prompt`; asserts its exit
 * `code` and returns its output and its `tool.call.completed` events' data.
 */
async function scriptedJsonRun(
  steps: string[][],
  prompt: string,
  code: number,
) {
  const result = await runCli(
    fixtureRunArgs(scripted(steps), "--json", prompt),
  );
  assert.equal(result.code, code, result.stderr);
  const events = parseJsonLines(result.stdout);
  return {
    stdout: result.stdout,
    toolsCompleted: dataOf(events, "tool.call.completed"),
  };
}

Deno.test("a turn that ends without text after a failed tool is run.tool_failed naming the tool and its error, exit 1", async () => {
  const steps = [["tool-failed", "t1", "pytest: command not found"]];
  const result = await scriptedJsonRun(steps, "run tests", 1);
  assert.deepEqual(result.toolsCompleted, [{
    tool_call_id: "t1",
    tool_name: "Tool t1",
    error: "pytest: command not found",
  }]);
  const data = failureOf(result.stdout);
  assert.equal(data.code, "run.tool_failed");
  assert.equal(data.retryable, false);
  assert.match(data.error, /"Tool t1" failed: pytest: command not found/);
  const human = await runCli(fixtureRunArgs(scripted(steps), "run tests"));
  assert.equal(human.code, 1);
  assert.match(human.stderr, /^error \[run\.tool_failed\]: .*"Tool t1"/m);
});

Deno.test("a failed tool the agent answers about still completes the run", async () => {
  const steps = [
    ["tool-failed", "t1", "pytest: command not found"],
    ["text", "pytest is not installed"],
  ];
  const result = await runCli(fixtureRunArgs(scripted(steps), "run tests"));
  assert.equal(result.code, 0, result.stderr);
  assert.equal(result.stdout, "pytest is not installed\n");
});

Deno.test("a tool call's file edit (ACP diff content) reaches its event as diffs", async () => {
  const steps = [
    ["tool-diff", "notes.txt", "old line\n", "new line\n"],
    ["text", "edited"],
  ];
  const result = await scriptedJsonRun(steps, "edit", 0);
  assert.deepEqual(result.toolsCompleted, [{
    tool_call_id: "tool-diff",
    tool_name: "Edit notes.txt",
    diffs: [{
      path: "notes.txt",
      old_text: "old line\n",
      new_text: "new line\n",
    }],
  }]);
});

Deno.test("a turn without text, rejection or failed tool is still acp.empty_response (retryable)", async () => {
  const result = await scriptedJsonRun([["tool", "t1"]], "hi", 1);
  const data = failureOf(result.stdout);
  assert.equal(data.code, "acp.empty_response");
  assert.equal(data.retryable, true);
});

/** A PATH holding a fake `npx` that fails as it does without a registry, and optionally a `codex-acp` that is the fixture agent. */
function lockedDownPath(withCodex: boolean): string {
  const bin = tempDir();
  const script = (path: string, body: string) => {
    Deno.writeTextFileSync(path, `#!/bin/sh\n${body}\n`);
    Deno.chmodSync(path, 0o755);
  };
  script(
    join(bin, "npx"),
    'echo "npm error code ENOTCACHED" >&2; echo "npm error request to the registry failed: cache mode is only-if-cached" >&2; exit 1',
  );
  if (withCodex) {
    script(join(bin, "codex-acp"), `exec ${fixtureCommand()} "$@"`);
  }
  return `${bin}:${Deno.env.get("PATH")}`;
}

Deno.test("a preset runs the agent's own executable from PATH when the registry is out of reach; probe and providers say so", async () => {
  const env = { PATH: lockedDownPath(true) };
  const probe = await runCli(
    ["probe", "codex", "--workspace", tempDir(), "--json"],
    { env },
  );
  assert.equal(probe.code, 0, probe.stdout);
  const report = JSON.parse(probe.stdout);
  assert.equal(report.command, "codex-acp");
  assert.equal(report.command_source, "executable");
  const human = await runCli(["probe", "codex", "--workspace", tempDir()], {
    env,
  });
  assert.match(
    human.stdout,
    /command: codex-acp \(the agent's own executable, found on PATH\)/,
  );
  const run = await runCli(
    ["run", "codex", "--workspace", tempDir(), "--data-dir", tempDir(), "hi"],
    { env },
  );
  assert.equal(run.code, 0, run.stderr);
  assert.equal(run.stdout, "echo: hi (turn 1)\n");
  const providers = await runCli(["providers"], { env });
  assert.match(providers.stdout, /codex +own executable +codex-acp /);
  const listed = await runCli(["providers", "--json"], { env });
  const codex = JSON.parse(listed.stdout).presets.find((
    preset: { name: string },
  ) => preset.name === "codex");
  assert.equal(codex.uses, "executable");
  assert.equal(codex.fallback, "npx -y @zed-industries/codex-acp@0.16.0");
});

Deno.test("without the executable on PATH a preset falls back to its pinned npx command, and probe names it", async () => {
  const env = { PATH: lockedDownPath(false) };
  const probe = await runCli(
    ["probe", "codex", "--workspace", tempDir(), "--json"],
    { env },
  );
  const report = JSON.parse(probe.stdout);
  assert.equal(report.command, "npx -y @zed-industries/codex-acp@0.16.0");
  assert.equal(report.command_source, "fallback");
  assert.equal(report.outcome, "agent_exited");
  assert.match(report.stderr_tail, /ENOTCACHED/);
  const providers = await runCli(["providers"], { env });
  assert.match(
    providers.stdout,
    /codex +fallback \(codex-acp not on PATH\) +npx -y @zed-industries\/codex-acp@0\.16\.0 /,
  );
});

Deno.test("when a stored session cannot be restored and a new one starts, session.reset says so (streaming or not)", async () => {
  const dataDir = tempDir();
  const workspace = tempDir();
  const state = tempDir();
  const where = {
    fixtureFlags: ["--resume", "--state-dir", state],
    dataDir,
    workspace,
  };
  const run = (text: string, ...extra: string[]) =>
    runCli(conversationRunArgs(where, text, extra));
  const first = await run("one");
  assert.equal(first.code, 0, first.stderr);
  const firstId = dataOf(parseJsonLines(first.stdout), "state.updated")[0]
    .value;
  assert.deepEqual(dataOf(parseJsonLines(first.stdout), "session.reset"), []);
  for (const entry of Deno.readDirSync(state)) {
    Deno.removeSync(join(state, entry.name));
  }
  const second = await run("two", "--streaming", "false");
  assert.equal(second.code, 0, second.stderr);
  const events = parseJsonLines(second.stdout);
  const newId = dataOf(events, "state.updated")[0].value;
  assert.notEqual(newId, firstId);
  const [reset] = dataOf(events, "session.reset");
  assert.equal(reset.stored_session_id, firstId);
  assert.equal(reset.session_id, newId);
  assert.match(String(reset.reason), /session\/resume with error -32002/);
  const types = events.map((event) => event.type);
  assert.ok(types.indexOf("session.reset") < types.indexOf("state.updated"));
});

Deno.test("an agent that dies during initialize fails the run with acp.process_exited and its stderr, without colour codes", async () => {
  const result = await runCli(
    fixtureRunArgs(["--exit-during-initialize"], "--json", "hi"),
  );
  assert.equal(result.code, 1);
  const failed = parseJsonLines(result.stdout).at(-1)!;
  const data = failed.data as Record<string, string>;
  assert.equal(data.code, "acp.process_exited");
  assert.match(data.stderr_tail, /Error: fixture could not start/);
  assert.match(data.error, /during initialize/);
  assert.ok(!result.stdout.includes("\\u001b"), "ANSI codes in the events");
});

Deno.test("a cancelled run leaves no defunct agent process behind: the runner has reaped its child when the run ends", async () => {
  await withHarness(async (h) => {
    const { config, pidFile } = grandchildConfig([
      ...["--text", "held"],
      "--stall-prompt",
    ]);
    const { log } = await cancelAfterFirstDelta(h.manager, {
      input: { text: "hi" },
      config,
    });
    assert.equal(log.events.at(-1)?.data.code, "run.cancelled");
    assertAgentGone(pidFile);
    const { agent_pid } = JSON.parse(Deno.readTextFileSync(pidFile));
    // Not even a zombie: the runner waited for its own child.
    assert.equal(
      await Deno.stat(`/proc/${agent_pid}`).then(() => true, () => false),
      false,
      `agent ${agent_pid} is still in the process table`,
    );
  });
});
