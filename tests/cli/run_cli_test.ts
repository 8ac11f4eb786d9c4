import assert from "node:assert/strict";
import { join } from "node:path";
import {
  agentPids,
  assertAgentGone,
  fixtureRunArgs,
  fixtureRunArgsIn,
  isAlive,
  parseJsonLines,
  readRecord,
  runCli,
  runJsonEvents,
  spawnCli,
  tempDir,
} from "../helpers.ts";
import { readUntilText } from "../stream_helpers.ts";
import { pathWithoutBwrap } from "../sandbox_helpers.ts";

/** The text of the run's `message.completed`. */
function completedText(events: Record<string, unknown>[]): string {
  const completed = events.find((e) => e.type === "message.completed")!;
  return (completed.data as { message: { content: string } }).message.content;
}

/** The error code of the `run.failed` that ends `runner run --json` output. */
function failedCode(stdout: string): string {
  const failed = parseJsonLines(stdout).at(-1)!;
  assert.equal(failed.type, "run.failed");
  return (failed.data as { code: string }).code;
}

/** The lines of `ps` for processes whose command line names `marker`. */
async function processesNaming(marker: string): Promise<string[]> {
  const ps = await new Deno.Command("ps", {
    args: ["-eo", "pid=,args="],
    stdout: "piped",
  }).output();
  return new TextDecoder().decode(ps.stdout).split("\n")
    .filter((line) => line.includes(marker));
}

Deno.test("run streams the agent's chunks in order", async () => {
  const result = await runCli(
    fixtureRunArgs(["--text", "abcdefghij", "--chunks", "4"], "hi"),
  );
  assert.equal(result.code, 0, result.stderr);
  assert.equal(result.stdout, "abcdefghij\n");
});

Deno.test("run --json prints the run-event shapes with increasing sequences", async () => {
  const result = await runCli(
    fixtureRunArgs(
      ["--text", "abcdefghij", "--chunks", "4", "--rich-updates"],
      "--json",
      // One delta per chunk; no run token whose first letter could end a chunk.
      "--delta-coalesce-ms",
      "0",
      "--langbot-assets-enabled",
      "false",
      "hi",
    ),
  );
  assert.equal(result.code, 0, result.stderr);
  const events = parseJsonLines(result.stdout);
  const deltas = events.filter((e) => e.type === "message.delta");
  assert.deepEqual(
    deltas.map((e) => (e.data as { chunk: { content: string } }).chunk.content),
    ["abc", "def", "gh", "ij"],
  );
  assert.deepEqual(
    deltas.map((e) =>
      (e.data as { chunk: { msg_sequence: number } }).chunk.msg_sequence
    ),
    [1, 2, 3, 4],
  );
  const last = (deltas[3].data as { chunk: { all_content: string } }).chunk;
  assert.equal(last.all_content, "abcdefghij");
  const types = events.map((e) => e.type);
  assert.ok(types.includes("tool.call.started"));
  assert.deepEqual(
    events.filter((e) => e.type === "tool.call.updated").map((e) => e.data),
    [{ tool_call_id: "tc-1", status: "in_progress" }],
  );
  assert.ok(types.includes("tool.call.completed"));
  assert.deepEqual(
    events.filter((e) => e.type === "usage.updated").map((e) => e.data),
    [{ used: 1234, size: 200000, cost: { amount: 0.01, currency: "USD" } }],
  );
  assert.ok(types.includes("thought.delta"));
  assert.ok(types.includes("plan.updated"));
  assert.equal(types.at(-1), "run.completed");
  assert.equal(
    types.filter((t) => t === "run.completed" || t === "run.failed").length,
    1,
  );
  const completed = events.at(-1)!;
  assert.deepEqual(completed.usage, {
    used: 1234,
    size: 200000,
    cost: { amount: 0.01, currency: "USD" },
  });
  assert.deepEqual(
    (events.find((e) => e.type === "message.completed")!.data as {
      message: unknown;
    }).message,
    { role: "assistant", content: "abcdefghij" },
  );
  assert.equal(
    (completed.data as { message?: unknown }).message,
    undefined,
    "run.completed leaves the answer to message.completed",
  );
  const sequences = events.map((e) => e.sequence as number);
  assert.deepEqual(sequences, sequences.map((_, i) => i + 1));
  const state = events.find((e) => e.type === "state.updated")!;
  assert.equal((state.data as { key: string }).key, "external.acp_session_id");
});

Deno.test("an update kind the SDK does not know is kept as agent.update, not message text", async () => {
  const events = await runJsonEvents(
    fixtureRunArgs(["--text", "ok", "--unknown-update"], "--json", "hi"),
  );
  const unknown = events.find((e) => e.type === "agent.update");
  assert.equal((unknown?.data as { kind: string }).kind, "future_kind_xyz");
  assert.equal(
    (events.findLast((e) => e.type === "message.completed")!.data as {
      message: { content: string };
    }).message.content,
    "ok",
  );
});

Deno.test("updates after the prompt answer are delivered before the terminal event", async () => {
  const events = await runJsonEvents(
    fixtureRunArgs(
      ["--text", "main", "--late-updates", "2"],
      "--json",
      "--late-update-ms",
      "2000",
      "hi",
    ),
  );
  assert.equal(completedText(events), "mainlate-1late-2");
  assert.equal(events.at(-1)!.type, "run.completed");
});

Deno.test("late-update-ms=0 ends the turn with the answer: later updates are not part of it", async () => {
  // A turn waits while late updates keep coming (the first right after the
  // answer; a window far above the 100 ms gap, so load cannot stretch the gap
  // past it); `0` ends the turn with the answer, even for a late update that
  // comes only 100 ms later.
  const waited = await runCli(
    fixtureRunArgs(
      ["--text", "main", "--late-update-at", "0,100"],
      "--json",
      "--late-update-ms",
      "1000",
      "hi",
    ),
  );
  const flags = [
    "--text",
    "main",
    "--late-updates",
    "2",
    "--late-update-delay-ms",
    "100",
  ];
  const ended = await runCli(
    fixtureRunArgs(flags, "--json", "--late-update-ms", "0", "hi"),
  );
  const message = (result: { stdout: string }) => {
    const events = parseJsonLines(result.stdout);
    assert.equal(events.at(-1)!.type, "run.completed");
    return completedText(events);
  };
  assert.equal(waited.code, 0, waited.stderr);
  assert.equal(message(waited), "mainlate@0late@100");
  assert.equal(ended.code, 0, ended.stderr);
  assert.equal(message(ended), "main");
});

Deno.test("stdout noise, megabytes of stderr and a 40 MB line do not break a run", async () => {
  const result = await runCli(
    fixtureRunArgs([
      "--text",
      "fine",
      "--stdout-noise",
      "--stderr-mb",
      "3",
      "--huge-line-mb",
      "40",
    ], "hi"),
  );
  assert.equal(result.code, 0, result.stderr);
  assert.ok(result.stdout.endsWith("fine\n"));
  assert.equal(result.stdout.length, 40 * 1024 * 1024 + "fine\n".length);
});

Deno.test("a line above max-message-mb fails with acp.message_too_large", async () => {
  const result = await runCli(
    fixtureRunArgs(
      ["--text", "x", "--huge-line-mb", "3"],
      "--max-message-mb",
      "1",
      "--json",
      "hi",
    ),
  );
  assert.equal(result.code, 1);
  assert.equal(failedCode(result.stdout), "acp.message_too_large");
});

Deno.test("a turn without assistant text fails with acp.empty_response", async () => {
  const result = await runCli(fixtureRunArgs(["--text", "''"], "--json", "hi"));
  assert.equal(result.code, 1);
  assert.equal(failedCode(result.stdout), "acp.empty_response");
});

Deno.test("no process of the agent's group outlives the run (SIGTERM-ignoring grandchild included)", async () => {
  const pidFile = join(tempDir(), "pids.json");
  const result = await runCli(
    fixtureRunArgs(
      ["--text", "bye", "--grandchild", "--pid-file", pidFile],
      "hi",
    ),
  );
  assert.equal(result.code, 0, result.stderr);
  assertAgentGone(pidFile);
});

Deno.test("an assets endpoint that cannot start fails the run and stops the agent that was already booting", async () => {
  const pidFile = join(tempDir(), "pids.json");
  const taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  try {
    const result = await runCli(
      fixtureRunArgs(
        ["--text", "bye", "--grandchild", "--pid-file", pidFile],
        "--json",
        "--langbot-assets-mode",
        "gateway",
        "--langbot-assets-gateway-port",
        String(taken.addr.port),
        "hi",
      ),
    );
    assert.equal(result.code, 1, result.stderr);
    assert.equal(failedCode(result.stdout), "assets.listen_failed");
  } finally {
    taken.close();
  }
  // The agent starts before the endpoint; whatever of it started is gone
  // (its command line names this test's pid file).
  assert.deepEqual(await processesNaming(pidFile), []);
});

Deno.test("runner run starts its agent once: the agent started ahead of the run machinery is the run's", async () => {
  const record = join(tempDir(), "record.jsonl");
  const result = await runCli(
    fixtureRunArgs(["--text", "one-agent", "--record", record], "hi"),
  );
  assert.equal(result.code, 0, result.stderr);
  assert.equal(result.stdout, "one-agent\n");
  const starts = readRecord(record).filter((entry) => entry.event === "start");
  assert.equal(starts.length, 1);
  const prompts = readRecord(record).filter((entry) =>
    entry.method === "session/prompt"
  );
  assert.equal(prompts.length, 1);
});

Deno.test("a run refused after its agent was started ahead (the store cannot open) leaves no agent behind", async () => {
  const dataDir = tempDir();
  // The store's file is a directory: the store cannot open, the agent's
  // group directory can be made, so the agent is started ahead.
  Deno.mkdirSync(join(dataDir, "runner.db"));
  const record = join(tempDir(), "record.jsonl");
  const result = await runCli(
    fixtureRunArgsIn(dataDir, ["--text", "never", "--record", record], "hi"),
  );
  assert.equal(result.code, 2, result.stderr);
  assert.match(result.stderr, /store\.unavailable/);
  assert.equal(result.stdout, "");
  assert.deepEqual(await processesNaming(record), []);
  // Torn down, not left to die: its group's reaper record is gone too.
  const records = [...Deno.readDirSync(join(dataDir, "agents"))]
    .filter((entry) => entry.name.endsWith(".json"));
  assert.deepEqual(records, []);
});

Deno.test("without bubblewrap, the reaper kills a group left behind by a SIGKILLed runner", async () => {
  const dataDir = tempDir();
  const pidFile = join(tempDir(), "pids.json");
  // With bwrap the agent's PID namespace dies with the runner: nothing is left.
  const env = { PATH: pathWithoutBwrap() };
  const child = spawnCli(
    fixtureRunArgsIn(
      dataDir,
      [
        "--text",
        "held",
        "--stall-prompt",
        "--grandchild",
        "--pid-file",
        pidFile,
      ],
      "--json",
      "hi",
    ),
    { env },
  );
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  await readUntilText(reader, "message.delta");
  child.kill("SIGKILL");
  await child.status;
  await reader.cancel();
  await child.stderr.cancel();
  const [, grandchild] = agentPids(pidFile);
  assert.equal(isAlive(grandchild), true, "the group should be left behind");
  const next = await runCli(
    fixtureRunArgsIn(dataDir, ["--text", "next"], "hi"),
    { env },
  );
  assert.equal(next.code, 0, next.stderr);
  assertAgentGone(pidFile);
});

Deno.test("bad input fails clearly before anything starts", async (t) => {
  const custom = ["run", "custom", "--acp-command", "x"];
  const cases: [string, string[], RegExp][] = [
    [
      "relative workspace",
      [...custom, "--workspace", "rel/dir", "hi"],
      /config\.invalid.*workspace: must be an absolute path/,
    ],
    [
      "non-object env-json",
      [...custom, "--env-json", "[1]", "hi"],
      /env-json: must be a JSON object/,
    ],
    [
      "negative timeout",
      [...custom, "--timeout=-1", "hi"],
      /timeout: must be greater than 0/,
    ],
    ["unknown provider", ["run", "nope", "hi"], /provider\.unknown/],
  ];
  for (const [name, args, message] of cases) {
    await t.step(name, async () => {
      const result = await runCli(args);
      assert.equal(result.code, 2);
      assert.match(result.stderr, message);
    });
  }
});

Deno.test("fs capabilities are advertised only when enabled", async () => {
  const check = async (
    extra: string[],
    expected: { readTextFile: boolean; writeTextFile: boolean },
  ) => {
    const record = join(tempDir(), "record.jsonl");
    const result = await runCli(
      fixtureRunArgs(["--text", "ok", "--record", record], ...extra, "hi"),
    );
    assert.equal(result.code, 0, result.stderr);
    const init = readRecord(record).find((line) =>
      line.method === "initialize"
    )!;
    assert.deepEqual(
      (init.params as { clientCapabilities: { fs: unknown } })
        .clientCapabilities.fs,
      expected,
    );
  };
  await check([], { readTextFile: false, writeTextFile: false });
  await check(["--fs-read", "true"], {
    readTextFile: true,
    writeTextFile: false,
  });
});

Deno.test("all_content rides on deltas only while the message is under 64 KiB; message.completed has it all", async () => {
  const text = "y".repeat(100 * 1024);
  const result = await runCli(
    fixtureRunArgs(
      ["--text", text, "--chunks", "4"],
      "--json",
      "--delta-coalesce-ms",
      "0",
      "hi",
    ),
  );
  assert.equal(result.code, 0, result.stderr);
  const events = parseJsonLines(result.stdout);
  const chunks = events.filter((e) => e.type === "message.delta").map((e) =>
    (e.data as { chunk: { content: string; all_content?: string } }).chunk
  );
  assert.ok(chunks.length >= 4, "one delta per chunk at least");
  let sofar = "";
  for (const chunk of chunks) {
    sofar += chunk.content;
    assert.equal(
      chunk.all_content,
      sofar.length < 64 * 1024 ? sofar : undefined,
      `at ${sofar.length} characters`,
    );
  }
  assert.equal(completedText(events), text);
});

Deno.test("streaming=false emits only the final message", async () => {
  const result = await runCli(
    fixtureRunArgs(
      ["--text", "abcdef", "--chunks", "3", "--rich-updates"],
      "--streaming",
      "false",
      "--json",
      "hi",
    ),
  );
  assert.equal(result.code, 0, result.stderr);
  const types = parseJsonLines(result.stdout).map((e) => e.type);
  assert.deepEqual(types, [
    "run.started",
    "state.updated",
    "message.completed",
    "run.completed",
  ]);
});

Deno.test("startup-timeout ends a start-up that takes too long with acp.start_timeout", async () => {
  const result = await runCli(
    fixtureRunArgs(
      ["--stall-initialize"],
      "--startup-timeout",
      "1",
      "--initialize-timeout",
      "30",
      "--json",
      "hi",
    ),
  );
  assert.equal(result.code, 1);
  assert.equal(failedCode(result.stdout), "acp.start_timeout");
});

Deno.test("--attach sends a file to an agent that accepts images", async () => {
  const record = join(tempDir(), "record.jsonl");
  const image = join(tempDir(), "pic.png");
  Deno.writeFileSync(
    image,
    new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
  );
  const result = await runCli(
    fixtureRunArgs(
      ["--text", "ok", "--image", "--record", record],
      "--attach",
      image,
      "look",
    ),
  );
  assert.equal(result.code, 0, result.stderr);
  const prompt = readRecord(record).find((line) =>
    line.method === "session/prompt"
  )!;
  assert.deepEqual((prompt.params as { prompt: unknown[] }).prompt, [
    { type: "text", text: "look" },
    { type: "image", data: "iVBORw0KGgo=", mimeType: "image/png" },
  ]);
});
