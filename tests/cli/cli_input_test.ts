/**
 * `runner run` as a person types it: the prompt from standard input (`-` or
 * a pipe) or a file, "did you mean" for a mistyped flag, provider or config
 * key, the help line for a missing provider, and a progress line while the
 * agent starts on a terminal.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { DENO_RUN_FLAGS } from "../../lib/runtime_permissions.ts";
import { quoteCommand } from "../../lib/agent/shell_words.ts";
import { parseRunConfig } from "../../lib/config.ts";
import {
  type CliResult,
  customRunArgs,
  fixtureCommand,
  outputWithInput,
  ROOT,
  runCli,
  tempDir,
} from "../helpers.ts";

/** Runs `runner` with `input` on its standard input (a pipe). */
function runWithStdin(args: string[], input: string): Promise<CliResult> {
  return outputWithInput(
    new Deno.Command(Deno.execPath(), {
      args: ["run", ...DENO_RUN_FLAGS, `${ROOT}main.ts`, ...args],
      env: { NO_COLOR: "1", RUNNER_DATA_DIR: tempDir() },
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }),
    input,
  );
}

function agent(): string[] {
  return customRunArgs(fixtureCommand(), tempDir(), []);
}

Deno.test("the prompt comes from stdin with -, from a pipe, or from --prompt-file", async () => {
  const dash = await runWithStdin([...agent(), "-"], "from a dash\n");
  assert.equal(dash.code, 0, dash.stderr);
  assert.equal(dash.stdout, "echo: from a dash (turn 1)\n");

  const piped = await runWithStdin(agent(), "from a pipe\n\n");
  assert.equal(piped.code, 0, piped.stderr);
  assert.equal(piped.stdout, "echo: from a pipe (turn 1)\n");

  const file = join(tempDir(), "prompt.txt");
  await Deno.writeTextFile(file, "from a file\n");
  const fromFile = await runWithStdin(
    [...agent(), "--prompt-file", file],
    "",
  );
  assert.equal(fromFile.code, 0, fromFile.stderr);
  assert.equal(fromFile.stdout, "echo: from a file (turn 1)\n");

  const twice = await runWithStdin(
    [...agent(), "--prompt-file", file, "words"],
    "",
  );
  assert.equal(twice.code, 2);
  assert.match(twice.stderr, /Give the prompt once/);

  const empty = await runWithStdin(agent(), "");
  assert.equal(empty.code, 2);
  assert.match(empty.stderr, /Give a prompt: .*- for standard input/);

  const missing = await runWithStdin(
    [...agent(), "--prompt-file", join(tempDir(), "nope.txt")],
    "",
  );
  assert.equal(missing.code, 2);
  assert.match(
    missing.stderr,
    /--prompt-file .*nope\.txt: cannot read the file/,
  );
});

Deno.test("a mistyped flag, provider or config key gets a did-you-mean; a missing provider the help line", async () => {
  const cases: [argv: string[], stderr: string | RegExp][] = [
    [
      ["run", "custom", "--workspce", "/tmp", "hi"],
      "error [config.invalid]: --workspce: unknown option (did you mean --workspace?)\nsee runner run --help\n",
    ],
    [
      ["run", "codx", "hi"],
      /error \[provider\.unknown\]: Unknown provider "codx" \(did you mean codex\?\)/,
    ],
    [
      ["run"],
      'error [config.invalid]: Give a provider: runner run <provider> "prompt" (runner providers lists them).\nsee runner run --help\n',
    ],
    [
      ["serve", "--max-concurent-runs", "3"],
      /\(did you mean --max-concurrent-runs\?\)/,
    ],
    [["probe", "custom", "--acp-comand", "x"], /did you mean --acp-command\?/],
  ];
  for (const [argv, stderr] of cases) {
    const result = await runCli(argv);
    assert.equal(result.code, 2, argv.join(" "));
    if (typeof stderr === "string") assert.equal(result.stderr, stderr);
    else assert.match(result.stderr, stderr);
  }
  assert.throws(
    () => parseRunConfig({ provider: "custom", workspace: "/", timout: 5 }),
    /timout: unknown config key \(did you mean timeout\?\)/,
  );
});

function hasScript(): boolean {
  try {
    return new Deno.Command("script", { args: ["--version"] }).outputSync()
      .success;
  } catch {
    return false;
  }
}

Deno.test({
  name:
    "on a terminal a progress line shows while the agent starts and is erased before the answer; not when piped",
  ignore: !hasScript(),
  fn: async () => {
    const command = quoteCommand([
      Deno.execPath(),
      "run",
      ...DENO_RUN_FLAGS,
      `${ROOT}main.ts`,
      ...agent(),
      "hello",
    ]);
    // script(1) gives the runner a terminal for stdout and stderr.
    const output = await new Deno.Command("script", {
      args: ["-qec", command, "/dev/null"],
      env: {
        NO_COLOR: "1",
        RUNNER_DATA_DIR: tempDir(),
        RUNNER_PROGRESS_DELAY_MS: "0",
      },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    const screen = new TextDecoder().decode(output.stdout);
    assert.equal(output.code, 0, screen);
    const ERASE = "\r\x1b[2K";
    assert.ok(
      [
        "starting agent…",
        "initializing…",
        "opening session…",
        "waiting for the agent…",
      ].some((step) => screen.includes(ERASE + step)),
      `no progress line in ${JSON.stringify(screen)}`,
    );
    const erased = screen.lastIndexOf(ERASE);
    const answer = screen.indexOf("echo: hello (turn 1)");
    assert.ok(answer > erased, `the answer came before the line was erased`);

    const piped = await runCli([...agent(), "hello"], {
      env: { RUNNER_PROGRESS_DELAY_MS: "0" },
    });
    assert.equal(piped.code, 0);
    assert.doesNotMatch(piped.stderr, /starting agent/);
  },
});
