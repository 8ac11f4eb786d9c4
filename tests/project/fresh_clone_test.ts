/**
 * The README's two commands on a clean clone: the serve command, taken from
 * the README itself, runs `runner serve` in a fresh directory until
 * `/healthz` answers; the test command is `.ci/run`, which CI runs on a fresh
 * clone (it cannot run inside the suite it starts).
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { ROOT, tempDir } from "../helpers.ts";

/** The commands of the README's "Two commands on a fresh machine" block. */
function readmeCommands(): string[] {
  const readme = Deno.readTextFileSync(`${ROOT}README.md`);
  const section = readme.slice(
    readme.indexOf("## Two commands on a fresh machine"),
  );
  const block = section.match(/```sh\n([\s\S]*?)```/)?.[1] ?? "";
  return block.split("\n").map((line) => line.replace(/#.*/, "").trim())
    .filter((line) => line !== "");
}

function available(program: string, args: string[]): boolean {
  try {
    return new Deno.Command(program, { args, stdout: "null", stderr: "null" })
      .outputSync().success;
  } catch {
    return false;
  }
}

const CAN_CLONE = available("git", ["-C", ROOT, "rev-parse", "HEAD"]) &&
  available("npx", ["--version"]);

/** The first JSON log line with `msg: "listening"`: the service's URL. */
async function listeningUrl(
  stderr: ReadableStream<Uint8Array>,
): Promise<{ url: string; seen: string }> {
  let seen = "";
  const lines = stderr.pipeThrough(new TextDecoderStream()).getReader();
  while (true) {
    const { value, done } = await lines.read();
    if (done) return { url: "", seen };
    seen += value;
    const match = seen.match(/\{[^\n]*"msg":"listening"[^\n]*\}/);
    if (match) {
      lines.releaseLock();
      return { url: JSON.parse(match[0]).url, seen };
    }
  }
}

Deno.test("the README names two commands: the serve command and .ci/run", () => {
  const commands = readmeCommands();
  assert.deepEqual(commands, ["npx -y deno@2.9.6 task start", ".ci/run"]);
  const mode = Deno.statSync(`${ROOT}.ci/run`).mode ?? 0;
  assert.ok(mode & 0o100, ".ci/run is not executable");
});

Deno.test({
  name:
    "on a fresh clone, the README's serve command runs runner serve until /healthz answers",
  ignore: !CAN_CLONE,
  async fn() {
    const clone = join(tempDir("runner-clone-"), "runner");
    const cloned = await new Deno.Command("git", {
      args: ["clone", "--quiet", ROOT, clone],
      stdout: "null",
      stderr: "piped",
    }).output();
    assert.ok(cloned.success, new TextDecoder().decode(cloned.stderr));
    assert.throws(() => Deno.statSync(join(clone, "node_modules")));
    const [program, ...args] = readmeCommands()[0].split(/\s+/);
    const env = Object.fromEntries(
      Object.entries(Deno.env.toObject()).filter(([name]) =>
        !name.startsWith("RUNNER_")
      ),
    );
    const child = new Deno.Command(program, {
      args: [...args, "--port", "0"],
      cwd: clone,
      env: { ...env, RUNNER_DATA_DIR: tempDir(), NO_COLOR: "1" },
      clearEnv: true,
      stdin: "null",
      stdout: "null",
      stderr: "piped",
      detached: true,
    }).spawn();
    try {
      const { url, seen } = await listeningUrl(child.stderr);
      assert.match(url, /^http:\/\/127\.0\.0\.1:\d+$/, seen);
      const health = await fetch(`${url}/healthz`);
      assert.equal(health.status, 200);
      assert.equal((await health.json()).status, "ok");
    } finally {
      // npx, deno task and runner serve share the group the child leads.
      try {
        Deno.kill(-child.pid, "SIGTERM");
      } catch { /* already gone */ }
      await child.status;
      await child.stderr.cancel().catch(() => {});
    }
  },
});
