/**
 * acpx (a real ACP client from npm, pinned in `tests/acpx/package.json`,
 * installed there with `npm install` on first use) spawning `runner acp` as its
 * agent: through `--url` to a real `runner serve`'s `/acp` with the fixture
 * agent behind it, its `--approve-all` and `--deny-all` answering the
 * permission the operator's policy leaves to a person; and without `--url`,
 * fronting the fixture agent itself.
 *
 * @module
 */

import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { agentCommand, ROOT } from "../helpers.ts";
import { startServe, tempDir } from "../serve_test_helpers.ts";

const ACPX_DIR = join(ROOT, "tests", "acpx");
const ACPX = join(ACPX_DIR, "node_modules", ".bin", "acpx");

/** Installs the pinned acpx (the lock file's) unless it is there. */
async function ensureAcpx(): Promise<void> {
  if (existsSync(ACPX)) return;
  const { code, stderr } = await new Deno.Command("npm", {
    // `npm install` with the lock file, not `npm ci`: npm's lock omits the
    // optional platform packages of other machines, which `ci` then refuses.
    args: [
      "install",
      "--no-save",
      "--ignore-scripts",
      "--no-audit",
      "--no-fund",
    ],
    cwd: ACPX_DIR,
    stdout: "null",
    stderr: "piped",
  }).output();
  assert.equal(code, 0, new TextDecoder().decode(stderr));
}

/** `runner acp …` as acpx's `--agent` command line. */
function runnerAcp(args: string[]): string {
  const quoted = args.map((arg) => `'${arg.replaceAll("'", `'\\''`)}'`);
  return [Deno.execPath(), "run", "-A", `${ROOT}main.ts`, "acp", ...quoted]
    .join(" ");
}

/** Runs `acpx … exec PROMPT` in `cwd`; its stdout and exit code. */
async function acpxExec(
  options: { agent: string; flags: string[]; prompt: string; cwd: string },
  env: Record<string, string>,
): Promise<{ code: number; stdout: string; stderr: string }> {
  const output = await new Deno.Command(ACPX, {
    args: [
      ...options.flags,
      "--format",
      "text",
      "--agent",
      options.agent,
      "exec",
      options.prompt,
    ],
    cwd: options.cwd,
    env: { NO_COLOR: "1", ...env },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decoder = new TextDecoder();
  return {
    code: output.code,
    stdout: decoder.decode(output.stdout),
    stderr: decoder.decode(output.stderr),
  };
}

Deno.test("acpx drives runner acp --url: a prompt, the permission approved and denied by acpx's flags", async () => {
  await ensureAcpx();
  const dir = await tempDir();
  const home = await Deno.makeTempDir({ dir, prefix: "home-" });
  const serve = await startServe({
    dataDir: dir,
    args: [
      "--provider",
      "custom",
      "--acp-command",
      agentCommand([
        "--permission",
        "--permission-options",
        "allow_once,reject_once",
      ]),
      "--workspace",
      dir,
      "--permission-decision",
      "ask",
    ],
  });
  try {
    const agent = runnerAcp(["--url", `${serve.url}/acp`]);
    const env = { HOME: home, RUNNER_API_TOKEN: serve.token ?? "" };
    const approved = await acpxExec(
      { agent, flags: ["--approve-all"], prompt: "hello", cwd: dir },
      env,
    );
    assert.equal(approved.code, 0, approved.stderr);
    assert.match(approved.stdout, /permission: allow_once\necho: hello/);
    assert.match(approved.stdout, /end_turn/);

    const denied = await acpxExec(
      { agent, flags: ["--deny-all"], prompt: "again", cwd: dir },
      env,
    );
    // acpx's PERMISSION_DENIED exit: it denied what the agent asked.
    assert.equal(denied.code, 5, denied.stderr);
    assert.match(denied.stdout, /permission: reject_once\necho: again/);
  } finally {
    await serve.stop();
  }
});

Deno.test("acpx drives runner acp without --url: the runner fronts the local agent itself", async () => {
  await ensureAcpx();
  const dir = await tempDir();
  const home = await Deno.makeTempDir({ dir, prefix: "home-" });
  const workspace = await Deno.makeTempDir({ dir, prefix: "ws-" });
  const agent = runnerAcp([
    "--data-dir",
    join(dir, "data"),
    "--provider",
    "custom",
    "--acp-command",
    agentCommand(["--chunks", "2"]),
    "--workspace",
    workspace,
  ]);
  const result = await acpxExec(
    { agent, flags: ["--approve-all"], prompt: "local", cwd: workspace },
    { HOME: home },
  );
  assert.equal(result.code, 0, result.stderr);
  assert.match(result.stdout, /echo: local \(turn 1\)/);
});
