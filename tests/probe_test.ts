import assert from "node:assert/strict";
import { join } from "node:path";
import { RECOVERY_PROMPT } from "../lib/probe.ts";
import { fixtureCommand, readRecord, runCli, tempDir } from "./helpers.ts";

/** Runs `runner probe custom --acp-command <command> <args…>`. */
function probeCustom(command: string, ...args: string[]) {
  return runCli(["probe", "custom", "--acp-command", command, ...args]);
}

Deno.test("probe reports ok and the fixture's capabilities", async () => {
  const result = await probeCustom(
    fixtureCommand("--load-session", "--resume", "--image", "--mcp-http"),
    "--workspace",
    tempDir(),
    "--json",
  );
  assert.equal(result.code, 0, result.stderr);
  const report = JSON.parse(result.stdout);
  assert.equal(report.outcome, "ok");
  assert.equal(report.protocol_version, 1);
  assert.deepEqual(report.agent_info, {
    name: "fixture-agent",
    version: "1.0.0",
  });
  assert.equal(report.capabilities.loadSession, true);
  assert.ok(report.capabilities.sessionCapabilities.resume);
  assert.equal(report.capabilities.promptCapabilities.image, true);
  assert.equal(report.capabilities.mcpCapabilities.http, true);
  assert.equal(report.session_ok, true);
  assert.equal(report.exit_code, 0);
  assert.ok(
    Object.keys(report).every((key) => /^[a-z0-9_]+$/.test(key)),
    `not snake_case: ${Object.keys(report)}`,
  );
});

Deno.test("probe --handshake-only initializes but never opens a session", async () => {
  const record = join(tempDir(), "record.jsonl");
  const result = await probeCustom(
    fixtureCommand("--fail-session-new", "--record", record),
    "--handshake-only",
    "--json",
  );
  assert.equal(result.code, 0, result.stderr);
  const report = JSON.parse(result.stdout);
  assert.equal(report.outcome, "ok");
  assert.equal(report.protocol_version, 1);
  assert.equal(report.session_ok, undefined);
  const methods = readRecord(record).map((line) => line.method)
    .filter(Boolean);
  assert.deepEqual(methods, ["initialize"]);
  // Without the flag the same agent fails at session/new.
  const full = await probeCustom(
    fixtureCommand("--fail-session-new"),
    "--json",
  );
  assert.notEqual(full.code, 0);
  assert.notEqual(JSON.parse(full.stdout).outcome, "ok");
  assert.equal(JSON.parse(full.stdout).hint, undefined);
});

Deno.test("probe human output names the capabilities", async () => {
  const result = await probeCustom(fixtureCommand("--load-session"));
  assert.equal(result.code, 0, result.stderr);
  assert.match(result.stdout, /outcome: ok/);
  assert.match(result.stdout, /loadSession: true/);
  assert.match(result.stdout, /session\/new: ok/);
});

Deno.test("probe of a missing binary reports missing_binary (127)", async () => {
  const result = await probeCustom("/nonexistent/agent-binary --acp", "--json");
  assert.equal(result.code, 127);
  const report = JSON.parse(result.stdout);
  assert.equal(report.outcome, "missing_binary");
  assert.equal(report.error.code, "acp.missing_binary");
  assert.equal(report.hint, undefined);
});

Deno.test("a preset agent that does not start is told what its preset needs besides npx", async () => {
  const noNpx = tempDir();
  const failingNpx = tempDir();
  // What pi-acp prints when the `pi` program it drives is missing.
  Deno.writeTextFileSync(
    join(failingNpx, "npx"),
    "#!/bin/sh\necho 'Could not start pi: executable not found' >&2\nexit 1\n",
  );
  Deno.chmodSync(join(failingNpx, "npx"), 0o755);
  // An adapter that answers initialize itself and fails at session/new, as
  // pi-acp does (-32603) when `pi` is missing.
  const adapterNpx = tempDir();
  Deno.writeTextFileSync(
    join(adapterNpx, "npx"),
    `#!/bin/sh\nexec ${fixtureCommand("--fail-session-new")}\n`,
  );
  Deno.chmodSync(join(adapterNpx, "npx"), 0o755);
  const needs =
    "pi-acp needs Node >=20; `pi` 0.81.0 or later on PATH, which pi-acp starts (npm i -g @earendil-works/pi-coding-agent; Node >=22.19.0).";
  for (
    const [path, outcome] of [
      [noNpx, "missing_binary"],
      [failingNpx, "agent_exited"],
      [adapterNpx, "session_error"],
    ]
  ) {
    const result = await runCli(["probe", "pi-acp", "--json"], {
      env: { PATH: path },
    });
    const report = JSON.parse(result.stdout);
    assert.equal(report.outcome, outcome, result.stdout);
    assert.equal(report.command, "npx -y pi-acp@0.0.34");
    assert.equal(report.hint, needs);
  }
  const human = await runCli(["probe", "pi-acp"], {
    env: { PATH: failingNpx },
  });
  assert.equal(human.code, 8);
  assert.match(human.stdout, new RegExp(`\nhint: ${RegExp.escape(needs)}\n`));
  assert.match(human.stdout, /Could not start pi/);
});

Deno.test("probe of a stalling agent reports handshake_timeout (124)", async () => {
  const result = await probeCustom(
    fixtureCommand("--stall-initialize", "--stderr-mb", "0.01"),
    "--initialize-timeout",
    "1",
    "--json",
  );
  assert.equal(result.code, 124);
  const report = JSON.parse(result.stdout);
  assert.equal(report.outcome, "handshake_timeout");
  assert.equal(report.error.code, "acp.initialize_timeout");
  assert.match(report.stderr_tail, /FIXTURE_SECRET_MARKER/);
});

Deno.test("probe of a wrong protocol version reports incompatible_protocol (3)", async () => {
  const result = await probeCustom(
    fixtureCommand("--protocol-version", "2"),
    "--json",
  );
  assert.equal(result.code, 3);
  assert.equal(JSON.parse(result.stdout).outcome, "incompatible_protocol");
});

Deno.test("probe of an agent that needs login reports unauthenticated (4) with its auth methods", async () => {
  const result = await probeCustom(fixtureCommand("--auth-required"));
  assert.equal(result.code, 4);
  assert.match(result.stdout, /outcome: unauthenticated/);
  assert.match(result.stdout, /fixture-login \(Fixture login\)/);
});

Deno.test("probe --recovery says resume, load, or fails for a broken load", async (t) => {
  const state = tempDir();
  await t.step("resume", async () => {
    const result = await probeCustom(
      fixtureCommand("--resume", "--load-session", "--state-dir", state),
      "--recovery",
      "--json",
    );
    assert.equal(result.code, 0, result.stdout);
    assert.equal(JSON.parse(result.stdout).recovery, "resume");
  });
  await t.step("load", async () => {
    const result = await probeCustom(
      fixtureCommand("--load-session", "--state-dir", state),
      "--recovery",
    );
    assert.equal(result.code, 0, result.stdout);
    assert.match(result.stdout, /recovery: load/);
  });
  await t.step(
    "advertised load that cannot load across processes",
    async () => {
      const result = await probeCustom(
        fixtureCommand("--load-broken", "--state-dir", state),
        "--recovery",
        "--json",
      );
      assert.equal(result.code, 6);
      const report = JSON.parse(result.stdout);
      assert.equal(report.outcome, "recovery_failed");
      assert.equal(report.recovery_prompted, true);
      assert.match(
        report.error.message,
        /could not restore a prompted session created by another process/,
      );
    },
  );
});

/** Runs `probe --recovery --json` on the fixture; returns exit code, report and what the agent received. */
async function probeRecovery(flags: string[], ...extra: string[]) {
  const record = join(tempDir(), "record.jsonl");
  const result = await probeCustom(
    fixtureCommand(...flags, "--state-dir", tempDir(), "--record", record),
    "--recovery",
    "--json",
    ...extra,
  );
  const prompts = readRecord(record).filter((line) =>
    line.method === "session/prompt"
  );
  return { code: result.code, report: JSON.parse(result.stdout), prompts };
}

Deno.test("probe --recovery prompts once, so agents that save only prompted sessions recover", async (t) => {
  // claude and codex: an unprompted session is unknown (-32002) to a new process.
  await t.step("resume (claude, codex)", async () => {
    const { code, report, prompts } = await probeRecovery([
      "--lazy-sessions",
      "--resume",
      "--load-session",
    ]);
    assert.equal(code, 0, JSON.stringify(report));
    assert.equal(report.outcome, "ok");
    assert.equal(report.recovery, "resume");
    assert.equal(report.recovery_prompted, true);
    assert.equal(prompts.length, 1);
    assert.deepEqual((prompts[0].params as { prompt: unknown }).prompt, [
      { type: "text", text: RECOVERY_PROMPT },
    ]);
  });
  // gemini: load only, and a plain error explains an unknown session.
  await t.step("load (gemini)", async () => {
    const { code, report } = await probeRecovery([
      "--lazy-sessions",
      "--load-session",
      "--not-found-message",
      "'No previous sessions found for this project.'",
    ]);
    assert.equal(code, 0, JSON.stringify(report));
    assert.equal(report.recovery, "load");
  });
});

Deno.test("probe --recovery --no-prompt is inconclusive, not failed, for an unprompted session, and keeps the agent's words", async (t) => {
  await t.step("claude, codex: -32002", async () => {
    const { code, report, prompts } = await probeRecovery(
      ["--lazy-sessions", "--resume", "--load-session"],
      "--no-prompt",
    );
    assert.equal(code, 7);
    assert.equal(report.outcome, "inconclusive");
    assert.equal(report.recovery_prompted, false);
    assert.equal(prompts.length, 0);
    assert.match(report.error.message, /never prompted/);
    assert.match(report.error.message, /session\/resume with error -32002/);
    assert.match(report.error.message, /session\/load with error -32002/);
  });
  await t.step("gemini: -32603 with its explanation", async () => {
    const result = await probeCustom(
      fixtureCommand(
        "--lazy-sessions",
        "--load-session",
        "--not-found-message",
        "'No previous sessions found for this project.'",
      ),
      "--recovery",
      "--no-prompt",
    );
    assert.equal(result.code, 7);
    assert.match(result.stdout, /outcome: inconclusive/);
    assert.match(result.stdout, /recovery check: no prompt/);
    assert.match(
      result.stdout,
      /-32603: .*No previous sessions found for this project\./,
    );
  });
});

Deno.test("an agent that dies during initialize is agent_exited (8) with its stderr, without colour codes", async () => {
  const result = await probeCustom(
    fixtureCommand("--exit-during-initialize"),
    "--json",
  );
  assert.equal(result.code, 8, result.stdout);
  const report = JSON.parse(result.stdout);
  assert.equal(report.outcome, "agent_exited");
  assert.equal(report.error.code, "acp.process_exited");
  assert.match(
    report.stderr_tail,
    /Error: fixture could not start: no model configured/,
  );
  assert.ok(!report.stderr_tail.includes("\x1b"), "ANSI codes in stderr tail");
});

Deno.test("probe goose fails with the seed's reason and the custom hint", async () => {
  const result = await runCli(["probe", "goose"]);
  assert.equal(result.code, 2);
  assert.match(result.stderr, /provider\.not_supported/);
  assert.match(result.stderr, /do not support session resume/);
  assert.match(result.stderr, /provider=custom and acp-command="goose acp"/);
});

Deno.test("runner providers lists presets and non-presets", async () => {
  const result = await runCli(["providers", "--json"]);
  assert.equal(result.code, 0);
  const lists = JSON.parse(result.stdout);
  assert.equal(lists.presets.length, 15);
  assert.equal(lists.unsupported.length, 10);
});

Deno.test("--version prints the version", async () => {
  const version = await runCli(["--version"]);
  assert.equal(version.code, 0);
  assert.match(version.stdout, /^runner \d+\.\d+\.\d+/);
});

Deno.test("probe of a file that is not executable reports spawn_error (126)", async () => {
  const path = `${tempDir()}/not-executable`;
  Deno.writeTextFileSync(path, "#!/bin/sh\necho hi\n");
  Deno.chmodSync(path, 0o644);
  const result = await probeCustom(path, "--json");
  assert.equal(result.code, 126);
  const report = JSON.parse(result.stdout);
  assert.equal(report.outcome, "spawn_error");
  assert.equal(report.error.code, "acp.spawn_error");
});

Deno.test("every subcommand answers --help", async () => {
  for (
    const command of [
      "serve",
      "daemon",
      "daemons",
      "probe",
      "run",
      "providers",
      "token",
    ]
  ) {
    const result = await runCli([command, "--help"]);
    assert.equal(result.code, 0, `${command} --help: ${result.stderr}`);
    assert.match(result.stdout, /Usage: runner/, command);
  }
});

Deno.test("probe lists the session's config options, modes and models with the values in force (text and --json)", async () => {
  const probe = (flags: string[], ...extra: string[]) =>
    probeCustom(fixtureCommand(...flags), "--workspace", tempDir(), ...extra);
  const text = await probe(["--session-config", "both"]);
  assert.equal(text.code, 0, text.stderr);
  assert.match(
    text.stdout,
    /^config option mode \(mode\): default\*, plan, acceptEdits$/m,
  );
  assert.match(text.stdout, /^config option model \(model\): smart\*, fast$/m);
  assert.match(
    text.stdout,
    /^config option effort \(thought_level\): low, medium\*, high$/m,
  );
  assert.match(text.stdout, /^config option verbose: true\/false, now false$/m);
  assert.match(text.stdout, /^modes: default\*, plan, acceptEdits$/m);
  const legacy = await probe(["--session-config", "modes"], "--json");
  const report = JSON.parse(legacy.stdout);
  assert.deepEqual(report.session_choices.values, {
    mode: "default",
    model: "smart",
  });
  assert.equal(report.session_choices.models.currentModelId, "smart");
  assert.deepEqual(report.session_choices.config_options, []);
  const none = await probe([]);
  assert.match(none.stdout, /^session choices: none advertised$/m);
});
