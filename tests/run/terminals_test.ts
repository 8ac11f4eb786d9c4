/**
 * The run's terminal host (`lib/run/terminals.ts`) as the agent and the
 * run's events see it, through `runner run` with the fixture agent, a few
 * runs holding many terminals each: what a command prints reaches the agent
 * (stdout and stderr, its env, its cwd) and the events (without escapes,
 * redacted even across chunks, at most `terminal-output-bytes` per terminal
 * and four times that per run), how it ended (its code, a signal, a
 * timeout, a kill, the run's end), what it left running is gone, a released
 * terminal is forgotten, and a rejected command never starts.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import {
  agentCommand,
  clientTerminalRunArgs,
  parseJsonLines,
  runCli,
  tempDir,
} from "../helpers.ts";
import { pathWithoutBwrap } from "../sandbox_helpers.ts";
import { terminalReports } from "../security/entrances.ts";

type Event = Record<string, unknown> & {
  type: string;
  data: Record<string, unknown>;
};

interface TerminalRun {
  events: Event[];
  reports: Record<string, unknown>[];
  workspace: string;
}

/** `runner run --json` running the fixture's `--terminal` entries `calls`. */
async function runTerminals(
  calls: Record<string, unknown>[],
  keys: Record<string, string> = {},
  workspace = tempDir(),
  env?: Record<string, string>,
): Promise<TerminalRun> {
  const result = await runCli(
    clientTerminalRunArgs(
      agentCommand(
        calls.flatMap((call) => ["--terminal", JSON.stringify(call)]),
      ),
      workspace,
      Object.entries(keys).flatMap(([key, value]) => [`--${key}`, value]),
    ),
    env ? { env } : {},
  );
  assert.equal(result.code, 0, result.stderr);
  const events = parseJsonLines(result.stdout) as Event[];
  const completed = events.find((e) => e.type === "message.completed");
  const text = String(
    (completed?.data.message as { content?: string } | undefined)?.content ??
      "",
  );
  return { events, reports: terminalReports(text), workspace };
}

/** The data of the run's `type` events for terminal `terminalId`. */
function eventsOf(
  run: TerminalRun,
  type: string,
  terminalId: unknown,
): Record<string, unknown>[] {
  return run.events.filter((e) =>
    e.type === type && e.data.terminal_id === terminalId
  ).map((e) => e.data);
}

function bytes(text: unknown): number {
  return new TextEncoder().encode(String(text)).length;
}

const SECRET = "Hv7cNq3xWp9tRm2k";
/** 10 × "é" (20 bytes), then "end": 23 bytes in all. */
const ACCENTS = "printf 'éééééééééé'; printf 'end'";
/** Endless output, for the limits. */
const FLOOD = { command: "sh", args: ["-c", "yes | head -c 100000"] };

Deno.test("runner run: terminals' output, env, cwd, exits, kills and releases as the agent and the events see them; at most terminal-output-bytes per terminal and four times that per run go out as events", async () => {
  const workspace = tempDir();
  Deno.mkdirSync(join(workspace, "sub"));
  const run = await runTerminals([
    // 0: escapes stripped; a secret redacted, also cut across two chunks.
    {
      command: "sh",
      args: [
        "-c",
        'printf "a\\033[31mred\\033[0m key=%s\\n" "$RUN_API_TOKEN"; printf "%s" "$RUN_API_TOKEN" | head -c 6; sleep 0.2; printf "%s\\n" "$RUN_API_TOKEN" | tail -c +7',
      ],
    },
    // 1: stdout and stderr in one output; its env; its cwd.
    {
      command: "sh",
      args: ["-c", 'echo "$GREETING"; pwd >&2'],
      env: { GREETING: "hello" },
      cwd: "sub",
    },
    // 2: its exit code.
    { command: "sh", args: ["-c", "exit 3"] },
    // 3: stdin is closed: `cat` ends at once.
    { command: "cat" },
    // 4, 5, 6: the agent's outputByteLimit only lowers the operator's; a
    // limit of 0 keeps one byte.
    { command: "sh", args: ["-c", ACCENTS], outputByteLimit: 8 },
    { command: "sh", args: ["-c", ACCENTS], outputByteLimit: 0 },
    { command: "sh", args: ["-c", ACCENTS], outputByteLimit: 3 },
    // 7: what it left running in its group is gone when its exit is reported.
    {
      command: "sh",
      args: [
        "-c",
        "{ (read -r pid _ < /proc/self/stat; echo $pid; exec sleep 1000 >/dev/null) & } | head -n 1",
      ],
      alive: true,
    },
    // 8: killed, it still answers with its output and how it ended.
    {
      command: "sh",
      args: ["-c", "echo ready; exec sleep 1000"],
      kill: true,
    },
    // 9: released, it is gone.
    { command: "true", release: true, outputAfterRelease: true },
    // 10-14: the limits.
    FLOOD,
    FLOOD,
    FLOOD,
    FLOOD,
    FLOOD,
    // 15: left running, it ends with the run.
    {
      command: "sh",
      args: ["-c", "echo waiting; exec sleep 1000"],
      wait: false,
    },
  ], {
    "terminal-output-bytes": "200",
    "env-json": JSON.stringify({ RUN_API_TOKEN: SECRET }),
  }, workspace);
  const { reports } = run;
  assert.equal(reports.length, 16);
  for (const [index, report] of reports.entries()) {
    assert.equal(
      report.error,
      undefined,
      `${index}: ${JSON.stringify(report)}`,
    );
    assert.match(String(report.id), /^term-[0-9a-f-]{36}$/);
  }
  assert.equal(new Set(reports.map((report) => report.id)).size, 16);
  assert.ok(!JSON.stringify(run.events).includes(SECRET.slice(0, 6)));

  const shown = eventsOf(run, "terminal.output", reports[0].id)
    .map((event) => event.output).join("");
  assert.equal(shown, "ared key=[REDACTED]\n[REDACTED]\n");

  assert.equal(
    reports[1].output,
    `hello\n${Deno.realPathSync(join(workspace, "sub"))}\n`,
  );
  const [started] = eventsOf(run, "terminal.started", reports[1].id);
  assert.deepEqual(started, {
    terminal_id: reports[1].id,
    command: "sh",
    args: ["-c", 'echo "$GREETING"; pwd >&2'],
    cwd: "sub",
  });
  assert.equal(eventsOf(run, "terminal.started", reports[2].id)[0].cwd, ".");

  assert.deepEqual(reports[2].exit, { code: 3, signal: null });
  assert.deepEqual(reports[2].status, { exitCode: 3, signal: null });
  assert.deepEqual(eventsOf(run, "terminal.exited", reports[2].id), [{
    terminal_id: reports[2].id,
    exit_code: 3,
    signal: null,
    truncated: false,
    timed_out: false,
  }]);
  assert.deepEqual(reports[3].exit, { code: 0, signal: null });
  assert.equal(reports[3].output, "");

  assert.deepEqual(
    [reports[4].output, reports[5].output, reports[6].output],
    ["ééend", "d", "end"],
  );
  assert.equal(reports[4].truncated, true);
  assert.equal(
    eventsOf(run, "terminal.exited", reports[4].id)[0].truncated,
    true,
  );

  assert.deepEqual(reports[7].alive, []);
  assert.deepEqual(reports[7].exit, { code: 0, signal: null });

  assert.equal(reports[8].output, "ready\n");
  const { signal } = reports[8].exit as { signal: string };
  assert.match(signal, /^SIG(TERM|KILL)$/);
  assert.deepEqual(reports[8].status, { exitCode: null, signal });

  assert.equal(reports[9].afterRelease, `Resource not found: ${reports[9].id}`);

  // Each flood stops at its own 200 bytes until the run's 800 run out.
  const outputs = run.events.filter((e) => e.type === "terminal.output");
  assert.equal(outputs.reduce((sum, e) => sum + bytes(e.data.output), 0), 800);
  for (const report of reports.slice(10, 13)) {
    const own = eventsOf(run, "terminal.output", report.id);
    assert.equal(own.reduce((sum, e) => sum + bytes(e.output), 0), 200);
    assert.deepEqual(own.filter((e) => e.stopped), [{
      terminal_id: report.id,
      output: own.at(-1)!.output,
      truncated: true,
      stopped: true,
    }]);
    assert.equal(report.output, "y\n".repeat(100), "the agent keeps 200");
  }
  const runOut = eventsOf(run, "terminal.output", reports[13].id).at(-1)!;
  assert.deepEqual([runOut.stopped, runOut.run_limit], [true, true]);
  assert.deepEqual(eventsOf(run, "terminal.output", reports[14].id), [{
    terminal_id: reports[14].id,
    output: "",
    truncated: true,
    stopped: true,
    run_limit: true,
  }]);
  assert.equal(reports[14].output, "y\n".repeat(100));

  assert.equal(reports[15].running, true);
  const [left] = eventsOf(run, "terminal.exited", reports[15].id);
  assert.equal(left.signal, "SIGTERM");
  const types = run.events.map((e) => e.type);
  assert.ok(
    types.lastIndexOf("terminal.exited") < types.indexOf("run.completed"),
    "every command ended before the run did",
  );
  assert.equal(types.filter((type) => type === "terminal.exited").length, 16);
});

Deno.test("runner run: terminal-timeout kills the command (timed_out, SIGTERM); output held back as a possible secret's start shows at the end; streaming=false sends no output events, the agent still reads it", async () => {
  const timed = await runTerminals([
    { command: "sh", args: ["-c", "echo go; exec sleep 1000"] },
    // Output that ends in what may begin a secret is held back until the
    // command ends, then shown.
    {
      command: "sh",
      args: [
        "-c",
        'printf "tail %s" "$(printf %s "$RUN_API_TOKEN" | head -c 4)"',
      ],
    },
  ], {
    "terminal-timeout": "1",
    "env-json": JSON.stringify({ RUN_API_TOKEN: SECRET }),
  });
  assert.equal(
    eventsOf(timed, "terminal.output", timed.reports[1].id)
      .map((event) => event.output).join(""),
    `tail ${SECRET.slice(0, 4)}`,
  );
  assert.deepEqual(timed.reports[0].exit, { code: null, signal: "SIGTERM" });
  const [exited] = eventsOf(timed, "terminal.exited", timed.reports[0].id);
  assert.deepEqual([exited.timed_out, exited.signal], [true, "SIGTERM"]);

  const quiet = await runTerminals([{ command: "echo", args: ["quiet"] }], {
    streaming: "false",
  });
  assert.equal(quiet.reports[0].output, "quiet\n");
  assert.deepEqual(
    quiet.events.filter((e) => e.type === "terminal.output"),
    [],
  );
  assert.equal(
    eventsOf(quiet, "terminal.exited", quiet.reports[0].id).length,
    1,
  );
});

Deno.test("runner run: a command the rules reject never starts, and the agent is told why; a cwd outside the workspace is refused", async () => {
  const workspace = tempDir();
  const run = await runTerminals([
    { command: "touch", args: ["ran"] },
    { command: "pwd", cwd: "/" },
  ], {
    "permission-decision": "ask",
    "permission-rules-json": JSON.stringify([
      { kind: "execute", title: "touch*", decision: "reject" },
      { kind: "execute", decision: "allow" },
    ]),
  }, workspace);
  assert.match(
    String(run.reports[0].error),
    /the run's permission policy rejected this command/,
  );
  assert.ok(run.reports[1].error, JSON.stringify(run.reports[1]));
  assert.deepEqual(run.events.filter((e) => e.type === "terminal.started"), []);
  assert.deepEqual([...Deno.readDirSync(workspace)], []);
});

Deno.test("runner run without bubblewrap (no PID namespace of its own): what a command left running in its group is killed when it exits", async () => {
  const run = await runTerminals(
    [{
      command: "sh",
      args: ["-c", "sleep 1000 >/dev/null 2>&1 & echo $!"],
      alive: true,
    }],
    {},
    tempDir(),
    { PATH: pathWithoutBwrap() },
  );
  assert.deepEqual(run.reports[0].exit, { code: 0, signal: null });
  assert.equal(String(run.reports[0].output).trim().length > 0, true);
  assert.deepEqual(run.reports[0].alive, []);
});
