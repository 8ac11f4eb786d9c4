/**
 * acpx (a real ACP client from npm, pinned in `tests/acpx/package.json`,
 * installed there with `npm install` on first use) spawning `runner acp` as its
 * agent: through `--url` to a real `runner serve`'s `/acp` with the fixture
 * agent behind it, its `--approve-all` and `--deny-all` answering the
 * permission the operator's policy leaves to a person; and without `--url`,
 * fronting the fixture agent itself; and acpx's persistent sessions through
 * `--url`: a second prompt that continues the session, and `acpx cancel`
 * of a turn in flight.
 *
 * @module
 */

import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { assertAgentGone, ROOT } from "../helpers.ts";
import { readUntilText } from "../stream_helpers.ts";
import {
  apiFetch,
  askingTargetArgs,
  fixtureTargetArgs,
  startServe,
  tempDir,
} from "../serve_test_helpers.ts";

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
    args: askingTargetArgs(dir),
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

/** Runs `acpx --format text --agent AGENT ARGS…` in `cwd`; fails unless it exits 0. */
async function acpx(
  options: { agent: string; args: string[]; cwd: string },
  env: Record<string, string>,
): Promise<string> {
  const output = await acpxCommand(options, env).output();
  const decoder = new TextDecoder();
  assert.equal(
    output.code,
    0,
    `acpx ${options.args.join(" ")}: ${decoder.decode(output.stderr)}`,
  );
  return decoder.decode(output.stdout);
}

function acpxCommand(
  options: { agent: string; args: string[]; cwd: string },
  env: Record<string, string>,
): Deno.Command {
  return new Deno.Command(ACPX, {
    args: ["--format", "text", "--agent", options.agent, ...options.args],
    cwd: options.cwd,
    env: { NO_COLOR: "1", ...env },
    stdout: "piped",
    stderr: "piped",
  });
}

/**
 * Ends the acpx session of `cwd` (its queue owner and the `runner acp` it
 * holds) and removes the socket directory acpx keeps in /tmp for `home`.
 */
async function closeAcpxSession(
  options: { agent: string; cwd: string },
  env: { HOME: string } & Record<string, string>,
): Promise<void> {
  await acpxCommand({ ...options, args: ["sessions", "close"] }, env).output();
  const digest = await crypto.subtle.digest(
    "SHA-256",
    new TextEncoder().encode(env.HOME),
  );
  const hash = Array.from(new Uint8Array(digest))
    .map((byte) => byte.toString(16).padStart(2, "0")).join("").slice(0, 10);
  await Deno.remove(`/tmp/acpx-${hash}`, { recursive: true }).catch(() => {});
}

/** The runs of one conversation in `/v1/runs`, oldest first. */
async function conversationRuns(
  url: string,
  conversationId: string,
): Promise<{ run_id: string; status: string; prompt?: string }[]> {
  const response = await apiFetch(
    `${url}/v1/runs?conversation_id=${conversationId}`,
  );
  assert.equal(response.status, 200);
  return (await response.json()).runs.reverse();
}

/**
 * A `runner serve` whose target is the fixture agent with `flags` (given its
 * temporary directory), and what
 * acpx needs to hold a session of `runner acp --url` on it: its agent
 * command, an environment with a home of its own, and the session's cwd.
 */
async function acpxOnServe(flags: (dir: string) => string[]) {
  await ensureAcpx();
  const dir = await tempDir();
  const home = await Deno.makeTempDir({ dir, prefix: "home-" });
  const workspace = await Deno.makeTempDir({ dir, prefix: "ws-" });
  const serve = await startServe({
    dataDir: dir,
    args: fixtureTargetArgs(workspace, flags(dir)),
  });
  const agent = runnerAcp(["--url", `${serve.url}/acp`]);
  const env = { HOME: home, RUNNER_API_TOKEN: serve.token ?? "" };
  const session = { agent, cwd: workspace };
  const stop = async () => {
    await closeAcpxSession(session, env);
    await serve.stop();
  };
  return { serve, env, session, stop };
}

Deno.test("acpx session through runner acp --url: a second prompt continues the same session", async () => {
  // Sessions kept on disk: each run's agent process loads the last one's.
  const { serve, env, session, stop } = await acpxOnServe((dir) => [
    "--load-session",
    "--state-dir",
    join(dir, "state"),
  ]);
  try {
    const sessionId =
      (await acpx({ ...session, args: ["sessions", "new"] }, env))
        .trim();
    assert.match(sessionId, /^acp-/, "acpx's session is a runner conversation");
    const first = await acpx({ ...session, args: ["prompt", "one"] }, env);
    assert.match(first, /echo: one \(turn 1\)/);
    const second = await acpx({ ...session, args: ["prompt", "two"] }, env);
    assert.match(
      second,
      /echo: two \(turn 2\)/,
      "the agent saw the second prompt in the first one's session",
    );
    const runs = await conversationRuns(serve.url, sessionId);
    assert.deepEqual(
      runs.map((run) => [run.prompt, run.status]),
      [["one", "completed"], ["two", "completed"]],
      "one conversation, a run per prompt",
    );
  } finally {
    await stop();
  }
});

Deno.test("acpx cancel through runner acp --url: the turn ends cancelled and its agent is gone", async () => {
  let pidFile = "";
  // Replies, then holds the turn until it is cancelled.
  const { serve, env, session, stop } = await acpxOnServe((dir) => {
    pidFile = join(dir, "agent-pids.json");
    return ["--stall-prompt", "--grandchild", "--pid-file", pidFile];
  });
  try {
    const sessionId =
      (await acpx({ ...session, args: ["sessions", "new"] }, env))
        .trim();
    const prompt = acpxCommand({ ...session, args: ["prompt", "hold"] }, env)
      .spawn();
    const stderr = new Response(prompt.stderr).text();
    const reader = prompt.stdout.pipeThrough(new TextDecoderStream())
      .getReader();
    // The agent's reply reached acpx: the turn is in flight at the agent.
    let stdout = await readUntilText(reader, "echo: hold");
    assert.match(stdout, /echo: hold/);
    const cancelled = await acpx({ ...session, args: ["cancel"] }, env);
    assert.match(cancelled, /cancel requested/);
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      stdout += value;
    }
    assert.equal((await prompt.status).code, 0, await stderr);
    assert.match(stdout, /\[done\] cancelled/);
    const runs = await conversationRuns(serve.url, sessionId);
    assert.deepEqual(runs.map((run) => run.status), ["cancelled"]);
    assertAgentGone(pidFile);
  } finally {
    await stop();
  }
});

Deno.test("acpx drives runner acp without --url: the runner fronts the local agent itself", async () => {
  await ensureAcpx();
  const dir = await tempDir();
  const home = await Deno.makeTempDir({ dir, prefix: "home-" });
  const workspace = await Deno.makeTempDir({ dir, prefix: "ws-" });
  const agent = runnerAcp([
    ...["--data-dir", join(dir, "data")],
    ...fixtureTargetArgs(workspace, ["--chunks", "2"]),
  ]);
  const result = await acpxExec(
    { agent, flags: ["--approve-all"], prompt: "local", cwd: workspace },
    { HOME: home },
  );
  assert.equal(result.code, 0, result.stderr);
  assert.match(result.stdout, /echo: local \(turn 1\)/);
});
