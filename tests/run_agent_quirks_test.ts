/**
 * Runs against the fixture agent behaving like real third-party agents do:
 * tool input only in a later update (claude), a turn ended as cancelled
 * after a rejected permission, death during initialize.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { fixtureCommand, parseJsonLines, runCli, tempDir } from "./helpers.ts";

function runArgs(fixtureFlags: string[], ...extra: string[]): string[] {
  return [
    "run",
    "custom",
    "--acp-command",
    fixtureCommand(...fixtureFlags),
    "--workspace",
    join(tempDir(), "ws"),
    "--data-dir",
    tempDir(),
    ...extra,
  ];
}

function dataOf(events: Record<string, unknown>[], type: string) {
  return events.filter((event) => event.type === type).map((event) =>
    event.data as Record<string, unknown>
  );
}

Deno.test("a tool call's input that arrives in a later tool_call_update is carried in tool.call.updated", async () => {
  const result = await runCli(
    runArgs(["--text", "done", "--tool-input-late"], "--json", "list files"),
  );
  assert.equal(result.code, 0, result.stderr);
  const events = parseJsonLines(result.stdout);
  assert.deepEqual(dataOf(events, "tool.call.started"), [{
    tool_call_id: "tc-late",
    tool_name: "Terminal",
    parameters: {},
    kind: "execute",
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

Deno.test("an agent that ends its turn as cancelled after a rejected permission is run.agent_cancelled, exit 3, not 130", async () => {
  const result = await runCli(
    runArgs(
      ["--permission", "--cancel-on-reject"],
      "--permission-decision",
      "reject_once",
      "--json",
      "write the file",
    ),
  );
  assert.equal(result.code, 3, result.stderr);
  const events = parseJsonLines(result.stdout);
  assert.equal(dataOf(events, "permission.decided")[0].kind, "reject_once");
  const failed = events.at(-1)!;
  assert.equal(failed.type, "run.failed");
  const data = failed.data as { code: string; error: string };
  assert.equal(data.code, "run.agent_cancelled");
  assert.match(data.error, /after a permission request was rejected/);
  const human = await runCli(
    runArgs(
      ["--permission", "--cancel-on-reject"],
      "--permission-decision",
      "reject_once",
      "write the file",
    ),
  );
  assert.equal(human.code, 3);
  assert.match(human.stderr, /^error \[run\.agent_cancelled\]: /m);
});
