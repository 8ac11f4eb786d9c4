/**
 * The `terminal/*` methods the runner answers, each by what the agent gets
 * back: after `terminal/kill` the terminal still exists, so the agent reads
 * how the command ended and what it printed, as it does for a terminal it
 * releases afterwards; a released terminal is gone (`terminal/output` on
 * it: resource not found).
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  agentCommand,
  clientTerminalRunArgs,
  parseJsonLines,
  runCli,
  tempDir,
} from "../helpers.ts";

/** The fixture's `terminal N: {json}` reply lines, by N. */
function terminalReports(text: string): Record<string, unknown>[] {
  const reports: Record<string, unknown>[] = [];
  for (const line of text.split("\n")) {
    const match = /^terminal (\d+): (.*)$/.exec(line);
    if (match) reports[Number(match[1])] = JSON.parse(match[2]);
  }
  return reports;
}

Deno.test("runner run: a killed terminal's exit and output stay readable after terminal/kill, as a released one's before its release", async () => {
  const workspace = tempDir();
  const calls = [
    // Killed once it printed: waitForExit and output still answer.
    { command: "sh", args: ["-c", "echo ready; exec sleep 1000"], kill: true },
    // Released at the end: the run's events show it ran and exited.
    { command: "echo", args: ["released"], release: true },
    // Released, then asked for again: it is gone.
    { command: "true", release: true, outputAfterRelease: true },
  ];
  const result = await runCli(clientTerminalRunArgs(
    agentCommand(
      calls.flatMap((call) => ["--terminal", JSON.stringify(call)]),
    ),
    workspace,
  ));
  assert.equal(result.code, 0, result.stderr);
  const events = parseJsonLines(result.stdout) as {
    type: string;
    data: Record<string, unknown>;
  }[];
  const completed = events.find((e) => e.type === "message.completed")!;
  const [killed, released, gone] = terminalReports(
    String((completed.data.message as { content: string }).content),
  );
  assert.equal(killed.error, undefined, JSON.stringify(killed));
  assert.equal(killed.output, "ready\n");
  assert.equal((killed.exit as { code: unknown }).code, null);
  const { signal } = killed.exit as { signal: string };
  assert.match(signal, /^SIG(TERM|KILL)$/, "ended by the kill");
  assert.deepEqual(killed.status, { exitCode: null, signal });
  assert.equal(released.error, undefined, JSON.stringify(released));
  assert.equal(released.output, "released\n");
  assert.equal(gone.afterRelease, `Resource not found: ${gone.id}`);
  const exited = events.filter((e) => e.type === "terminal.exited");
  assert.equal(exited.length, 3);
  assert.equal(exited[0].data.terminal_id, killed.id);
});
