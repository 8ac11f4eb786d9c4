import assert from "node:assert/strict";
import { fixtureCommand, runCli, tempDir } from "../helpers.ts";

/** Asserts the clean two-line usage error and exit code 2. */
function assertUsageError(
  result: { code: number; stdout: string; stderr: string },
  command: string,
  message: RegExp,
) {
  assert.equal(result.code, 2, result.stderr);
  const lines = result.stderr.trimEnd().split("\n");
  assert.equal(lines.length, 2, result.stderr);
  assert.match(lines[0], /^error \[config\.invalid\]: /);
  assert.match(lines[0], message);
  assert.equal(lines[1], `see runner ${command} --help`);
  assert.equal(result.stdout, "");
}

Deno.test("an unknown flag is one error line and a help hint, exit 2", async (t) => {
  for (
    const [command, args] of [
      ["run", ["run", "custom", "--nope", "hi"]],
      ["probe", ["probe", "custom", "--nope"]],
      ["daemons", ["daemons", "list", "--nope"]],
      ["providers", ["providers", "--nope"]],
      ["token", ["token", "--nope"]],
    ] as const
  ) {
    await t.step(command, async () => {
      assertUsageError(
        await runCli([...args]),
        command,
        /--nope: unknown option$/,
      );
    });
  }
});

Deno.test("a flag without its value is a usage error", async () => {
  assertUsageError(
    await runCli(["probe", "custom", "--initialize-timeout"]),
    "probe",
    /--initialize-timeout: needs a value$/,
  );
  assertUsageError(
    await runCli(["run", "custom", "--workspace", "--json", "hi"]),
    "run",
    /--workspace: needs a value .*--workspace=VALUE/,
  );
  assertUsageError(
    await runCli(["run", "custom", "--json=yes", "hi"]),
    "run",
    /--json: takes no value$/,
  );
});

Deno.test("a negative number after a flag is its value and fails the value check", async (t) => {
  for (
    const args of [["--initialize-timeout", "-5"], ["--initialize-timeout=-5"]]
  ) {
    await t.step(args.join(" "), async () => {
      const result = await runCli([
        "probe",
        "custom",
        "--acp-command",
        fixtureCommand(),
        "--workspace",
        tempDir(),
        ...args,
      ]);
      assert.equal(result.code, 2, result.stderr);
      assert.equal(
        result.stderr,
        "error [config.invalid]: initialize-timeout: must be greater than 0\n",
      );
    });
  }
  const run = await runCli([
    "run",
    "custom",
    "--acp-command",
    fixtureCommand(),
    "--timeout",
    "-0.5",
    "hi",
  ]);
  assert.equal(run.code, 2, run.stderr);
  assert.match(
    run.stderr,
    /^error \[config\.invalid\]: timeout: must be greater than 0\n$/,
  );
});

Deno.test("extra arguments and unknown actions are usage errors", async () => {
  assertUsageError(
    await runCli(["token", "extra"]),
    "token",
    /unexpected argument "extra"$/,
  );
  assertUsageError(
    await runCli(["daemons"]),
    "daemons",
    /give an action: list or unfence ID$/,
  );
  assertUsageError(
    await runCli(["daemons", "frob"]),
    "daemons",
    /unknown action "frob"/,
  );
  assertUsageError(
    await runCli(["daemons", "unfence", "a", "b", "--yes"]),
    "daemons",
    /unfence takes exactly one daemon ID$/,
  );
});

Deno.test("daemons unfence without --yes warns and exits 2; providers and token still work", async () => {
  const dataDir = tempDir();
  const unconfirmed = await runCli([
    "daemons",
    "unfence",
    "laptop-1",
    "--data-dir",
    dataDir,
  ]);
  assert.equal(unconfirmed.code, 2);
  assert.match(unconfirmed.stderr, /runner daemons unfence laptop-1 --yes/);
  const confirmed = await runCli([
    "daemons",
    "unfence",
    "laptop-1",
    "--yes",
    "--data-dir",
    dataDir,
  ]);
  assert.equal(confirmed.code, 1);
  assert.match(confirmed.stderr, /was not fenced; nothing to do/);
  const providers = await runCli(["providers", "--json"]);
  assert.equal(providers.code, 0, providers.stderr);
  assert.ok(JSON.parse(providers.stdout).presets.length > 0);
  const token = await runCli(["token"]);
  assert.equal(token.code, 0, token.stderr);
  assert.match(token.stdout, /^[A-Za-z0-9_-]{43}\n$/);
});
