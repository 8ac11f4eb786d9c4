import assert from "node:assert/strict";
import { join } from "node:path";
import { compileArgs } from "../../scripts/compile.ts";
import { RUNTIME_FLAGS } from "../../lib/runtime_permissions.ts";
import { fixtureCommand, ROOT, tempDir } from "../helpers.ts";

Deno.test("the binary is compiled with exactly the runtime flags (permission set and V8 settings)", () => {
  const args = compileArgs({ output: "dist/runner" });
  assert.deepEqual(args.slice(1, 1 + RUNTIME_FLAGS.length), [
    ...RUNTIME_FLAGS,
  ]);
  assert.equal(args.at(-1), "main.ts");
  assert.ok(!args.includes("-A") && !args.includes("--allow-all"));
});

Deno.test({
  name:
    "with DENORT_BIN set, the compiled binary probes and runs the fixture agent",
  ignore: !Deno.env.get("DENORT_BIN"),
  async fn() {
    const output = join(tempDir(), "runner");
    const compiled = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", `${ROOT}scripts/compile.ts`, "--output", output],
      cwd: ROOT,
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.ok(compiled.success, new TextDecoder().decode(compiled.stderr));
    const run = async (...args: string[]) => {
      const result = await new Deno.Command(output, {
        args,
        stdout: "piped",
        stderr: "piped",
      }).output();
      return {
        code: result.code,
        stdout: new TextDecoder().decode(result.stdout),
      };
    };
    assert.match((await run("--version")).stdout, /^runner /);
    const probe = await run(
      "probe",
      "custom",
      "--acp-command",
      fixtureCommand(),
      "--json",
    );
    assert.equal(probe.code, 0);
    const answer = await run(
      "run",
      "custom",
      "--acp-command",
      fixtureCommand("--text", "from the binary"),
      "--workspace",
      tempDir(),
      "--data-dir",
      tempDir(),
      "hi",
    );
    assert.equal(answer.stdout, "from the binary\n");
  },
});
