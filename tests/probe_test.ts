import assert from "node:assert/strict";
import { fixtureCommand, runCli, tempDir } from "./helpers.ts";

Deno.test("probe reports ok and the fixture's capabilities", async () => {
  const result = await runCli([
    "probe",
    "custom",
    "--acp-command",
    fixtureCommand("--load-session", "--resume", "--image", "--mcp-http"),
    "--workspace",
    tempDir(),
    "--json",
  ]);
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

Deno.test("probe human output names the capabilities", async () => {
  const result = await runCli([
    "probe",
    "custom",
    "--acp-command",
    fixtureCommand("--load-session"),
  ]);
  assert.equal(result.code, 0, result.stderr);
  assert.match(result.stdout, /outcome: ok/);
  assert.match(result.stdout, /loadSession: true/);
  assert.match(result.stdout, /session\/new: ok/);
});

Deno.test("probe of a missing binary reports missing_binary (127)", async () => {
  const result = await runCli([
    "probe",
    "custom",
    "--acp-command",
    "/nonexistent/agent-binary --acp",
    "--json",
  ]);
  assert.equal(result.code, 127);
  const report = JSON.parse(result.stdout);
  assert.equal(report.outcome, "missing_binary");
  assert.equal(report.error.code, "acp.missing_binary");
});

Deno.test("probe of a stalling agent reports handshake_timeout (124)", async () => {
  const result = await runCli([
    "probe",
    "custom",
    "--acp-command",
    fixtureCommand("--stall-initialize", "--stderr-mb", "0.01"),
    "--initialize-timeout",
    "1",
    "--json",
  ]);
  assert.equal(result.code, 124);
  const report = JSON.parse(result.stdout);
  assert.equal(report.outcome, "handshake_timeout");
  assert.equal(report.error.code, "acp.initialize_timeout");
  assert.match(report.stderr_tail, /FIXTURE_SECRET_MARKER/);
});

Deno.test("probe of a wrong protocol version reports incompatible_protocol (3)", async () => {
  const result = await runCli([
    "probe",
    "custom",
    "--acp-command",
    fixtureCommand("--protocol-version", "2"),
    "--json",
  ]);
  assert.equal(result.code, 3);
  assert.equal(JSON.parse(result.stdout).outcome, "incompatible_protocol");
});

Deno.test("probe of an agent that needs login reports unauthenticated (4) with its auth methods", async () => {
  const result = await runCli([
    "probe",
    "custom",
    "--acp-command",
    fixtureCommand("--auth-required"),
  ]);
  assert.equal(result.code, 4);
  assert.match(result.stdout, /outcome: unauthenticated/);
  assert.match(result.stdout, /fixture-login \(Fixture login\)/);
});

Deno.test("probe --recovery says resume, load, or fails for a broken load", async (t) => {
  const state = tempDir();
  await t.step("resume", async () => {
    const result = await runCli([
      "probe",
      "custom",
      "--acp-command",
      fixtureCommand("--resume", "--load-session", "--state-dir", state),
      "--recovery",
      "--json",
    ]);
    assert.equal(result.code, 0, result.stdout);
    assert.equal(JSON.parse(result.stdout).recovery, "resume");
  });
  await t.step("load", async () => {
    const result = await runCli([
      "probe",
      "custom",
      "--acp-command",
      fixtureCommand("--load-session", "--state-dir", state),
      "--recovery",
    ]);
    assert.equal(result.code, 0, result.stdout);
    assert.match(result.stdout, /recovery: load/);
  });
  await t.step(
    "advertised load that cannot load across processes",
    async () => {
      const result = await runCli([
        "probe",
        "custom",
        "--acp-command",
        fixtureCommand("--load-broken", "--state-dir", state),
        "--recovery",
        "--json",
      ]);
      assert.equal(result.code, 6);
      const report = JSON.parse(result.stdout);
      assert.equal(report.outcome, "recovery_failed");
      assert.match(
        report.error.message,
        /could not restore a session created by another process/,
      );
    },
  );
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
  const result = await runCli([
    "probe",
    "custom",
    "--acp-command",
    path,
    "--json",
  ]);
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
