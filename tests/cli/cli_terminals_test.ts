/**
 * Client terminals (`client-terminals`) through `runner run` with the fixture
 * agent: a command's output reaches the agent and the run's events, its cwd
 * is confined to the workspace by real path, its output is truncated from
 * the start past the limit, `terminal-timeout` kills it, a command left
 * running dies with the run, the permission rules decide commands like
 * requests, and without the key the capability is off.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { processGroupMembers } from "../../lib/agent/process_table.ts";
import { quoteCommand } from "../../lib/agent/shell_words.ts";
import { parseRunConfig } from "../../lib/config.ts";
import { RunnerError } from "../../lib/errors.ts";
import {
  agentCommand,
  clientTerminalRunArgs,
  customRunArgs,
  fixtureArgv,
  parseJsonLines,
  readRecord,
  ROOT,
  runCli,
  spawnCli,
  tempDir,
} from "../helpers.ts";
import { readUntilText } from "../stream_helpers.ts";
import {
  confinedFlags,
  DENO_DIR,
  markedGone,
  pathWithoutBwrap,
  sandboxWorld,
} from "../sandbox_helpers.ts";
import { terminalReports } from "../security/entrances.ts";

type Event = Record<string, unknown> & {
  type: string;
  data: Record<string, unknown>;
};

/**
 * Prints the command's process group as the host sees it (a builtin `read`
 * of /proc/self, so also from inside a PID namespace, where `$$` is small).
 */
const PRINT_GROUP = "read -r _ _ _ _ group _ < /proc/self/stat; echo $group";

/** The fixture flag for one terminal entry. */
export function terminalFlag(call: Record<string, unknown>): string[] {
  return ["--terminal", JSON.stringify(call)];
}

interface CliRun {
  code: number;
  stderr: string;
  events: Event[];
  reports: Record<string, unknown>[];
}

/** `runner run --json` with the fixture running `flags`, and run-config `keys`. */
async function runWith(
  flags: string[],
  keys: Record<string, string> = {},
  options: { command?: string; env?: Record<string, string> } = {},
): Promise<CliRun> {
  const workspace = keys.workspace ?? tempDir();
  const result = await runCli(
    clientTerminalRunArgs(
      options.command ?? agentCommand(flags),
      workspace,
      Object.entries(keys).filter(([key]) => key !== "workspace")
        .flatMap(([key, value]) => [`--${key}`, value]),
    ),
    { env: options.env },
  );
  const events = parseJsonLines(result.stdout) as Event[];
  const completed = events.find((e) => e.type === "message.completed");
  const text = String(
    (completed?.data.message as { content?: string } | undefined)?.content ??
      "",
  );
  return {
    code: result.code,
    stderr: result.stderr,
    events,
    reports: terminalReports(text),
  };
}

function ofType(events: Event[], type: string): Record<string, unknown>[] {
  return events.filter((e) => e.type === type).map((e) => e.data);
}

Deno.test("runner run: a terminal's output reaches the agent and the events, with the agent's env plus its own, and tool events name it", async () => {
  const run = await runWith(
    terminalFlag({
      command: "sh",
      args: [
        "-c",
        'echo "out $FROM_ENV_JSON $FROM_CREATE"; echo err >&2; exit 3',
      ],
      env: { FROM_CREATE: "created" },
    }),
    { "env-json": JSON.stringify({ FROM_ENV_JSON: "json" }) },
  );
  assert.equal(run.code, 0, run.stderr);
  const [report] = run.reports;
  assert.equal(report.output, "out json created\nerr\n");
  assert.deepEqual(report.exit, { code: 3, signal: null });
  assert.equal(report.truncated, false);
  const [started] = ofType(run.events, "terminal.started");
  assert.deepEqual(started, {
    terminal_id: report.id,
    command: "sh",
    args: [
      "-c",
      'echo "out $FROM_ENV_JSON $FROM_CREATE"; echo err >&2; exit 3',
    ],
    cwd: ".",
  });
  const output = ofType(run.events, "terminal.output");
  assert.equal(output.map((o) => o.output).join(""), "out json created\nerr\n");
  assert.ok(output.every((o) => o.terminal_id === report.id));
  assert.deepEqual(ofType(run.events, "terminal.exited"), [{
    terminal_id: report.id,
    exit_code: 3,
    signal: null,
    truncated: false,
    timed_out: false,
  }]);
  const tool = ofType(run.events, "tool.call.started")[0];
  assert.deepEqual(tool.terminal_ids, [report.id]);
  const done = ofType(run.events, "tool.call.completed")[0];
  assert.deepEqual(done.terminal_ids, [report.id]);
  const types = run.events.map((e) => e.type);
  assert.ok(
    types.indexOf("permission.decided") < types.indexOf("terminal.started"),
    "decided before it started",
  );
});

Deno.test("runner run: a terminal's cwd must be a directory inside the workspace by real path; .. and symlinks out are refused and nothing starts", async () => {
  const outside = tempDir();
  const workspace = tempDir();
  Deno.mkdirSync(join(workspace, "sub"));
  Deno.mkdirSync(join(workspace, "..foo"));
  Deno.symlinkSync(outside, join(workspace, "link-out"));
  const cwds = [
    "sub",
    join(workspace, "..foo"),
    "..",
    join(workspace, "link-out"),
    join(workspace, "sub", "..", ".."),
    "/",
    "missing",
  ];
  const run = await runWith(
    cwds.flatMap((cwd) => terminalFlag({ command: "pwd", cwd })),
    { workspace },
  );
  assert.equal(run.code, 0, run.stderr);
  const realWorkspace = Deno.realPathSync(workspace);
  assert.equal(run.reports[0].output, `${join(realWorkspace, "sub")}\n`);
  assert.equal(run.reports[1].output, `${join(realWorkspace, "..foo")}\n`);
  for (const index of [2, 3, 4, 5]) {
    assert.match(
      String(run.reports[index].error),
      /outside the workspace/,
      cwds[index],
    );
  }
  assert.match(String(run.reports[6].error), /not a directory/);
  assert.deepEqual(
    ofType(run.events, "terminal.started").map((s) => s.cwd),
    ["sub", "..foo"],
  );
  assert.equal(
    ofType(run.events, "permission.decided").length,
    2,
    "refused cwds are not even put to the policy",
  );
});

Deno.test("runner run: output past the limit is cut from the start at a character boundary, truncated=true; the agent's limit only lowers the operator's", async () => {
  // 10 × "é" is 20 bytes, then "end": 23 bytes in all.
  const script = "printf 'éééééééééé'; printf 'end'";
  const run = await runWith([
    ...terminalFlag({
      command: "sh",
      args: ["-c", script],
      outputByteLimit: 8,
    }),
    ...terminalFlag({ command: "sh", args: ["-c", script] }),
    ...terminalFlag({
      command: "sh",
      args: ["-c", script],
      outputByteLimit: 1000,
    }),
  ], { "terminal-output-bytes": "6" });
  assert.equal(run.code, 0, run.stderr);
  // 6 bytes: "end" and one "é" (5 bytes; a second would need 7).
  assert.equal(run.reports[0].output, "éend");
  assert.equal(run.reports[0].truncated, true);
  assert.equal(run.reports[1].output, "éend");
  assert.equal(run.reports[2].output, "éend", "1000 cannot raise 6");
  const exited = ofType(run.events, "terminal.exited");
  assert.ok(exited.every((e) => e.truncated === true));
  const agents = await runWith([
    ...terminalFlag({
      command: "sh",
      args: ["-c", script],
      outputByteLimit: 8,
    }),
    ...terminalFlag({
      command: "sh",
      args: ["-c", script],
      outputByteLimit: 9,
    }),
  ]);
  // 8 bytes keep 7: a third "é" would be cut in half.
  assert.equal(agents.reports[0].output, "ééend");
  assert.equal(agents.reports[1].output, "éééend");
  assert.equal(agents.reports[1].truncated, true);
});

Deno.test("runner run: terminal-timeout kills the command's group; the exit names the signal and timed_out", async () => {
  const run = await runWith(
    terminalFlag({ command: "sh", args: ["-c", `${PRINT_GROUP}; sleep 1000`] }),
    { "terminal-timeout": "1" },
  );
  assert.equal(run.code, 0, run.stderr);
  const [report] = run.reports;
  assert.deepEqual(report.exit, { code: null, signal: "SIGTERM" });
  const [exited] = ofType(run.events, "terminal.exited");
  assert.equal(exited.timed_out, true);
  assert.equal(exited.signal, "SIGTERM");
  const pid = Number(String(report.output).trim());
  assert.deepEqual(await processGroupMembers(pid), []);
});

Deno.test("runner run: a command left running dies with the run, its whole group", async () => {
  const run = await runWith(terminalFlag({
    command: "sh",
    args: ["-c", `${PRINT_GROUP}; sleep 1000 & sleep 1000`],
    wait: false,
  }));
  assert.equal(run.code, 0, run.stderr);
  const [report] = run.reports;
  assert.equal(report.running, true);
  const pid = Number(String(report.output).trim());
  assert.ok(pid > 1);
  assert.deepEqual(await processGroupMembers(pid), []);
  const types = run.events.map((e) => e.type);
  assert.ok(
    types.indexOf("terminal.exited") < types.indexOf("run.completed"),
    "the command ended before the run did",
  );
  assert.equal(ofType(run.events, "terminal.exited")[0].signal, "SIGTERM");
});

Deno.test("runner run: rules reject the command (rule 0, never started, the agent gets an error) and allow a read request in the same run", async () => {
  const run = await runWith([
    "--permission-calls",
    JSON.stringify([{ kind: "read", title: "Read a.ts", path: "a.ts" }]),
    ...terminalFlag({ command: "touch", args: ["ran"] }),
  ], {
    "permission-decision": "ask",
    "permission-rules-json": JSON.stringify([
      { kind: "execute", decision: "reject" },
      { kind: "read", decision: "allow" },
    ]),
  });
  assert.equal(run.code, 0, run.stderr);
  const decided = ofType(run.events, "permission.decided");
  const read = decided.find((d) => d.title === "Read a.ts")!;
  assert.deepEqual([read.decision, read.rule], ["allow_once", 1]);
  const command = decided.find((d) => d.title === "touch ran")!;
  assert.deepEqual([command.decision, command.rule], ["reject_once", 0]);
  assert.deepEqual(ofType(run.events, "terminal.started"), []);
  assert.match(String(run.reports[0].error), /permission policy rejected/);
});

Deno.test("runner run: without client-terminals the capability is false and terminal/create fails", async () => {
  const record = join(tempDir(), "record.jsonl");
  const run = await runWith([
    "--record",
    record,
    ...terminalFlag({ command: "true" }),
  ], { "client-terminals": "false" });
  assert.equal(run.code, 0, run.stderr);
  const initialize = readRecord(record).find((r) => r.method === "initialize")!;
  assert.equal(
    (initialize.params as { clientCapabilities: { terminal: boolean } })
      .clientCapabilities.terminal,
    false,
  );
  assert.match(String(run.reports[0].error), /Method not found/i);
  assert.deepEqual(ofType(run.events, "terminal.started"), []);
});

Deno.test("client-terminals with location=remote-ssh is config.invalid, through runner run too", async () => {
  assert.throws(
    () =>
      parseRunConfig({
        provider: "custom",
        "acp-command": "agent",
        location: "remote-ssh",
        "ssh-target": "me@box",
        "client-terminals": true,
      }),
    (error: unknown) =>
      error instanceof RunnerError && error.code === "config.invalid" &&
      /^client-terminals: is not available with location=remote-ssh/.test(
        error.message,
      ),
  );
  const result = await runCli([
    "run",
    "custom",
    "--acp-command",
    "agent",
    "--location",
    "remote-ssh",
    "--ssh-target",
    "me@box",
    "--client-terminals",
    "true",
    "go",
  ]);
  assert.equal(result.code, 2, result.stderr);
  assert.match(result.stderr, /config\.invalid.*client-terminals/);
});

Deno.test("runner run, sandbox=confined: a terminal runs under the agent's sandbox (own PID namespace, the home hidden) and dies with the run", async () => {
  const world = sandboxWorld();
  const command = confinedFixtureCommand(
    ...terminalFlag({
      command: "sh",
      args: ["-c", `echo $$; cat ${world.homeSecret} 2>&1; true`],
    }),
    ...terminalFlag({
      command: "sh",
      args: ["-c", "echo running; sleep 1000"],
      wait: false,
    }),
  );
  const run = await runWith([], {
    workspace: tempDir("sandbox-ws-"),
    sandbox: "confined",
    "sandbox-read-paths": `${ROOT},${DENO_DIR}`,
    "env-json": JSON.stringify({ DENO_DIR, SANDBOX_TEST_MARK: world.marker }),
  }, { command, env: world.environment });
  assert.equal(run.code, 0, run.stderr);
  const [first, second] = run.reports;
  const [pid, cat] = String(first.output).split("\n");
  assert.ok(Number(pid) < 10, `a PID namespace of its own (pid ${pid})`);
  assert.match(cat, /No such file or directory/);
  assert.equal(second.running, true);
  assert.deepEqual(await markedGone(world.marker), []);
});

Deno.test("runner run, streaming=false: no terminal.output events, the start and exit still are, and the agent still reads the output", async () => {
  const run = await runWith(
    terminalFlag({ command: "echo", args: ["quiet"] }),
    { streaming: "false" },
  );
  assert.equal(run.code, 0, run.stderr);
  assert.equal(run.reports[0].output, "quiet\n");
  assert.deepEqual(ofType(run.events, "terminal.output"), []);
  assert.equal(ofType(run.events, "terminal.started").length, 1);
  assert.equal(ofType(run.events, "terminal.exited").length, 1);
});

Deno.test("runner run: a secret in a terminal's output is redacted from its events, even cut across chunks", async () => {
  const secret = "Tq8vLx2mZr5wKp9c";
  const run = await runWith(
    terminalFlag({
      command: "sh",
      args: [
        "-c",
        'printf "key=%s\\n" "$RUN_API_TOKEN"; printf "%s" "$RUN_API_TOKEN" | head -c 5; sleep 0.2; printf "%s\\n" "$RUN_API_TOKEN" | tail -c +6',
      ],
    }),
    { "env-json": JSON.stringify({ RUN_API_TOKEN: secret }) },
  );
  assert.equal(run.code, 0, run.stderr);
  const output = ofType(run.events, "terminal.output")
    .map((o) => o.output).join("");
  assert.equal(output, "key=[REDACTED]\n[REDACTED]\n");
  assert.ok(!JSON.stringify(run.events).includes(secret));
  assert.ok(!JSON.stringify(run.events).includes(secret.slice(0, 5)));
});

Deno.test("without bubblewrap, kill -9 of runner run leaves a terminal's group recorded: the next runner run reaps it", async () => {
  const dataDir = tempDir();
  const env = { RUNNER_DATA_DIR: dataDir, PATH: pathWithoutBwrap() };
  const child = spawnCli(
    heldTerminalRunArgs({
      fixture: (...flags) => agentCommand(flags),
      terminal: { command: "sh", args: ["-c", "echo $$; sleep 1000"] },
      workspace: tempDir(),
    }),
    { env },
  );
  let pid = 0;
  try {
    const reader = child.stdout.pipeThrough(new TextDecoderStream())
      .getReader();
    let seen = "";
    while (!pid) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`runner run ended early: ${seen}`);
      seen += value;
      const line = seen.split("\n").find((l) =>
        l.includes('"terminal.output"')
      );
      if (line) pid = Number(String(JSON.parse(line).data.output).trim());
    }
    child.kill("SIGKILL");
    await child.status;
    reader.cancel().catch(() => {});
    assert.ok(
      (await processGroupMembers(pid)).length > 0,
      "a kill -9 leaves the group behind",
    );
    const next = await runCli(
      customRunArgs(agentCommand([]), tempDir(), [
        "--langbot-assets-enabled",
        "false",
        "go",
      ]),
      { env },
    );
    assert.equal(next.code, 0, next.stderr);
    assert.deepEqual(await processGroupMembers(pid), [], "reaped at start");
  } finally {
    try {
      child.kill("SIGKILL");
    } catch { /* already gone */ }
    await child.stderr.cancel().catch(() => {});
    if (pid) {
      try {
        Deno.kill(-pid, "SIGKILL");
      } catch { /* gone */ }
    }
  }
});

/** What {@linkcode heldTerminalRunArgs} runs. */
interface HeldTerminalRun {
  /** The fixture agent's command with these flags. */
  fixture: (...flags: string[]) => string;
  /** The terminal call the agent makes (left running). */
  terminal: Record<string, unknown>;
  workspace: string;
  /** More `runner run` flags. */
  flags?: string[];
}

/**
 * `runner run --json` arguments (client terminals on) whose agent starts
 * `terminal`, leaves it running and holds its turn until cancelled.
 */
function heldTerminalRunArgs(run: HeldTerminalRun): string[] {
  return customRunArgs(
    run.fixture(
      ...terminalFlag({ ...run.terminal, wait: false }),
      "--stall-prompt",
    ),
    run.workspace,
    [
      ...run.flags ?? [],
      ...["--client-terminals", "true", "--langbot-assets-enabled", "false"],
      ...["--json", "hold"],
    ],
  );
}

/** The fixture's command for a confined run, each flag quoted. */
function confinedFixtureCommand(...flags: string[]): string {
  return quoteCommand(fixtureArgv(flags, ["--node-modules-dir=manual"]));
}

/** A shared library that, once loaded, writes which program loaded it (and what it could read of `secret`) to `log`. */
function preloadLibrary(dir: string, log: string, secret: string): string {
  const source = join(dir, "evil.c");
  const library = join(dir, "evil.so");
  Deno.writeTextFileSync(
    source,
    `#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void loaded(void) {
  char exe[512] = {0}; char secret[128] = {0};
  readlink("/proc/self/exe", exe, sizeof exe - 1);
  FILE *in = fopen("${secret}", "r");
  if (in) { fgets(secret, sizeof secret, in); fclose(in); }
  FILE *out = fopen("${log}", "a");
  if (out) { fprintf(out, "exe=%s secret=%s\\n", exe, secret); fclose(out); }
}
`,
  );
  const built = new Deno.Command("cc", {
    args: ["-shared", "-fPIC", "-o", library, source],
  }).outputSync();
  assert.ok(built.success, new TextDecoder().decode(built.stderr));
  return library;
}

const HAVE_CC = new Deno.Command("sh", { args: ["-c", "command -v cc"] })
  .outputSync().success;

Deno.test({
  name:
    "runner run, sandbox=confined: LD_PRELOAD of a library in the workspace is refused; no loader variable reaches bwrap or the command",
  ignore: !HAVE_CC,
  fn: async () => {
    const world = sandboxWorld();
    const workspace = tempDir("sandbox-ws-");
    const log = join(workspace, "preload.log");
    const library = preloadLibrary(workspace, log, world.homeSecret);
    const command = confinedFixtureCommand(
      ...terminalFlag({
        command: "sh",
        args: ["-c", "cat $HOME/secret.txt 2>&1; true"],
        env: { LD_PRELOAD: library },
      }),
      ...terminalFlag({
        command: "sh",
        args: ["-c", "echo $FROM_CREATE"],
        env: { LD_LIBRARY_PATH: workspace, FROM_CREATE: "inside" },
      }),
      ...terminalFlag({
        command: "sh",
        args: ["-c", "echo $FROM_CREATE"],
        env: { FROM_CREATE: "inside" },
      }),
    );
    const run = await runWith([], {
      workspace,
      sandbox: "confined",
      "sandbox-read-paths": `${ROOT},${DENO_DIR}`,
      "env-json": JSON.stringify({ DENO_DIR, SANDBOX_TEST_MARK: world.marker }),
    }, { command, env: world.environment });
    assert.equal(run.code, 0, run.stderr);
    assert.match(String(run.reports[0].error), /may not set LD_PRELOAD/);
    assert.match(String(run.reports[1].error), /may not set LD_LIBRARY_PATH/);
    assert.equal(run.reports[2].output, "inside\n", "other variables do");
    let loaded = "";
    try {
      loaded = Deno.readTextFileSync(log);
    } catch { /* never loaded */ }
    assert.equal(loaded, "", "the library never ran, in or out of bwrap");
    assert.equal(ofType(run.events, "terminal.started").length, 1);
    assert.deepEqual(await markedGone(world.marker), []);
  },
});

/** Host pids whose environment holds `NAME=value`, with their programs. */
function holding(entry: string): { pid: number; exe: string }[] {
  const found: { pid: number; exe: string }[] = [];
  for (const proc of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(proc.name)) continue;
    try {
      const environ = Deno.readTextFileSync(`/proc/${proc.name}/environ`);
      if (!environ.split("\0").includes(entry)) continue;
      found.push({
        pid: Number(proc.name),
        exe: Deno.readLinkSync(`/proc/${proc.name}/exe`),
      });
    } catch { /* gone meanwhile */ }
  }
  return found;
}

Deno.test("runner run, sandbox=confined: a terminal's env entries are set inside the sandbox, never in bwrap's own environment", async () => {
  const world = sandboxWorld();
  const mark = `TERMINAL_MARK=${crypto.randomUUID()}`;
  const child = spawnCli(
    heldTerminalRunArgs({
      fixture: confinedFixtureCommand,
      terminal: {
        command: "sh",
        args: ["-c", "echo started; sleep 1000"],
        env: { TERMINAL_MARK: mark.slice("TERMINAL_MARK=".length) },
      },
      workspace: tempDir("sandbox-ws-"),
      flags: confinedFlags({ SANDBOX_TEST_MARK: world.marker }),
    }),
    { env: world.environment },
  );
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  try {
    await readUntilText(reader, '"terminal.output"', "runner run ended early");
    const found = holding(mark);
    assert.ok(
      found.some((p) => !p.exe.endsWith("/bwrap")),
      "the command has it",
    );
    assert.deepEqual(found.filter((p) => p.exe.endsWith("/bwrap")), []);
  } finally {
    child.kill("SIGTERM");
    await child.status;
    reader.cancel().catch(() => {});
    await child.stderr.cancel().catch(() => {});
  }
  assert.deepEqual(await markedGone(world.marker), []);
});

Deno.test("runner run: a terminal's env is part of the decision and cannot change which program a rule allowed (PATH); a path to the program meets its name's reject rule", async () => {
  const workspace = tempDir();
  Deno.mkdirSync(join(workspace, "bin"));
  const fake = join(workspace, "bin", "echo");
  Deno.writeTextFileSync(fake, `#!/bin/sh\ntouch ${workspace}/hijacked\n`);
  Deno.chmodSync(fake, 0o755);
  const path = `${workspace}/bin:/usr/bin:/bin`;
  const touch = new TextDecoder().decode(
    new Deno.Command("sh", {
      args: ["-c", "command -v touch"],
      stdout: "piped",
    })
      .outputSync().stdout,
  ).trim();
  const run = await runWith([
    ...terminalFlag({ command: "echo", args: ["hi"], env: { PATH: path } }),
    ...terminalFlag({
      command: "echo",
      args: ["allowed"],
      env: { PATH: path },
    }),
    ...terminalFlag({ command: "echo", args: ["hi"] }),
    ...terminalFlag({ command: touch, args: ["touched"] }),
  ], {
    workspace,
    "permission-decision": "reject_once",
    "permission-rules-json": JSON.stringify([
      { kind: "execute", title: "echo hi", decision: "allow" },
      { kind: "execute", title: "PATH=** echo allowed", decision: "allow" },
      { kind: "execute", title: "touch *", decision: "reject" },
    ]),
  });
  assert.equal(run.code, 0, run.stderr);
  const decided = ofType(run.events, "permission.decided");
  assert.deepEqual(decided.map((d) => [d.title, d.decision, d.rule]), [
    [`PATH=${path} echo hi`, "reject_once", "default"],
    [`PATH=${path} echo allowed`, "allow_once", 1],
    ["echo hi", "allow_once", 0],
    [`${touch} touched`, "reject_once", 2],
  ]);
  assert.match(String(run.reports[0].error), /permission policy rejected/);
  assert.equal(run.reports[1].output, "allowed\n", "the agent's echo ran");
  assert.equal(run.reports[2].output, "hi\n");
  assert.throws(() => Deno.statSync(join(workspace, "hijacked")));
  assert.throws(
    () => Deno.statSync(join(workspace, "touched")),
    "a reject rule on the bare name holds for the same program by path",
  );
});

Deno.test("runner run: endless output puts at most terminal-output-bytes into events, the last one stopped=true", async () => {
  const run = await runWith(
    terminalFlag({ command: "sh", args: ["-c", "yes | head -c 300000"] }),
    { "terminal-output-bytes": "1000" },
  );
  assert.equal(run.code, 0, run.stderr);
  const output = ofType(run.events, "terminal.output");
  const bytes = output.reduce(
    (sum, o) => sum + new TextEncoder().encode(String(o.output)).length,
    0,
  );
  assert.ok(bytes <= 1000, `${bytes} bytes of events`);
  assert.deepEqual(
    [output.at(-1)!.truncated, output.at(-1)!.stopped],
    [true, true],
  );
  assert.equal(output.filter((o) => o.stopped).length, 1);
  assert.equal(String(run.reports[0].output).length, 1000, "the agent's view");
  assert.deepEqual(run.reports[0].exit, { code: 0, signal: null });
});

Deno.test("runner run: at most 64 terminals are held at once; released ones make room", async () => {
  const held = await runWith(
    Array.from({ length: 65 }, () => terminalFlag({ command: "true" })).flat(),
  );
  assert.equal(held.code, 0, held.stderr);
  assert.equal(held.reports.filter((r) => r.error).length, 1);
  assert.match(String(held.reports[64].error), /already holds 64 terminals/);
  const released = await runWith(
    Array.from(
      { length: 70 },
      () => terminalFlag({ command: "true", release: true }),
    ).flat(),
  );
  assert.equal(released.code, 0, released.stderr);
  assert.ok(released.reports.every((r) => !r.error && r.id));
  assert.equal(new Set(released.reports.map((r) => r.id)).size, 70);
});

Deno.test("runner run: what a command leaves running in its group is killed when it exits; ids are unguessable; a last broken character shows", async () => {
  const run = await runWith([
    ...terminalFlag({
      command: "sh",
      // The background job prints its pid as the host sees it (a builtin
      // `read` of /proc/self), also from inside a PID namespace.
      args: [
        "-c",
        "{ (read -r pid _ < /proc/self/stat; echo $pid; exec sleep 1000 >/dev/null) & } | head -n 1",
      ],
      alive: true,
    }),
    ...terminalFlag({ command: "sh", args: ["-c", "printf 'a\\303' >&2"] }),
  ]);
  assert.equal(run.code, 0, run.stderr);
  const [background, broken] = run.reports;
  assert.deepEqual(background.exit, { code: 0, signal: null });
  assert.deepEqual(background.alive, [], "gone when its exit is reported");
  assert.match(String(background.id), /^term-[0-9a-f-]{36}$/);
  assert.equal(broken.output, "a\uFFFD");
});

Deno.test("runner run: a secret in a terminal's command line is redacted from terminal.started and permission.decided", async () => {
  const secret = "Wm4pQx8vRt2zLk6n";
  const run = await runWith(
    terminalFlag({
      command: "sh",
      args: ["-c", `echo ${secret} >/dev/null; echo done`],
      env: { PASSED: secret },
    }),
    { "env-json": JSON.stringify({ RUN_API_TOKEN: secret }) },
  );
  assert.equal(run.code, 0, run.stderr);
  assert.equal(run.reports[0].output, "done\n");
  const [started] = ofType(run.events, "terminal.started");
  assert.deepEqual(started.args, [
    "-c",
    "echo [REDACTED] >/dev/null; echo done",
  ]);
  const [decided] = ofType(run.events, "permission.decided");
  assert.equal(
    decided.title,
    "PASSED=[REDACTED] sh -c echo [REDACTED] >/dev/null; echo done",
  );
  assert.ok(!JSON.stringify(run.events).includes(secret));
});
