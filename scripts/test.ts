/**
 * The test suite as `deno task test` (and so CI) runs it: `deno test` over
 * `tests/` and the `@example` blocks in `lib/` (`--doc`: each is type-checked
 * and run), or over the paths given, with `TMPDIR` pointed at a fresh
 * directory of its own, then a check that the suite left nothing in that
 * directory. Every test, fixture agent, spawned runner and sshd inherits that
 * `TMPDIR`, so anything they forget to remove shows up here, whatever else
 * runs on the machine. The suite sees the machine's environment without the
 * variables whose names mark a secret: a CI's token would otherwise be
 * redacted from the runs' text and hold back what the tests read. Usage: `deno task test [deno test flags and paths]`.
 *
 * @module
 */

import { isSecretName } from "../lib/secrets.ts";

/** The line this script prints when the suite left something behind. */
export const LEFTOVER_MARKER = "temp dir check: FAILED";

/** Lists what is in `dir` (names, sorted), or nothing when it is gone. */
export function leftovers(dir: string): string[] {
  try {
    return [...Deno.readDirSync(dir)].map((entry) => entry.name).sort();
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return [];
    throw error;
  }
}

if (import.meta.main) {
  const root = new URL("..", import.meta.url).pathname;
  const tmp = Deno.makeTempDirSync({ prefix: "runner-suite-tmp-" });
  const args = Deno.args.length ? Deno.args : ["--doc", "lib/", "tests/"];
  const status = await new Deno.Command(Deno.execPath(), {
    args: ["test", "-A", "--parallel", ...args],
    cwd: root,
    clearEnv: true,
    env: {
      ...Object.fromEntries(
        Object.entries(Deno.env.toObject()).filter(([name]) =>
          !isSecretName(name)
        ),
      ),
      TMPDIR: tmp,
      DENO_JOBS: Deno.env.get("DENO_JOBS") ?? "4",
    },
    stdin: "null",
    stdout: "inherit",
    stderr: "inherit",
  }).output();
  const left = leftovers(tmp);
  Deno.removeSync(tmp, { recursive: true });
  if (left.length) {
    console.error(
      `${LEFTOVER_MARKER}: the suite left ${left.length} entries in its TMPDIR: ${
        left.slice(0, 20).join(", ")
      }${
        left.length > 20 ? ", …" : ""
      }. Make each test use tempDir() from tests/helpers.ts (removed when the module unloads) and end every process it starts.`,
    );
    Deno.exit(status.code || 1);
  }
  console.error("temp dir check: ok (the suite left nothing in its TMPDIR)");
  Deno.exit(status.code);
}
