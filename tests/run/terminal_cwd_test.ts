/**
 * A client terminal's command entering its decided cwd
 * (`lib/run/terminal_cwd.ts`), as the agent sees the command run: it runs
 * with exactly its arguments in that directory (whatever the directory is
 * called), and where the name now leads elsewhere (a link swapped in, the
 * directory gone) nothing runs: exit 126 and why, on stderr. The shell's
 * own complaints name it `runner-cwd`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { CWD_MOVED_EXIT, inDecidedCwd } from "../../lib/run/terminal_cwd.ts";
import { tempDir } from "../helpers.ts";

/** Runs `argv` from `/` (as a terminal starts away from its cwd); what it said. */
function run(argv: string[]) {
  const [program, ...args] = argv;
  const output = new Deno.Command(program, {
    args,
    cwd: "/",
    stdin: "null",
    env: { CDPATH: "/tmp" },
  }).outputSync();
  const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
  return {
    code: output.code,
    stdout: text(output.stdout),
    stderr: text(output.stderr),
  };
}

Deno.test("inDecidedCwd: the command runs in the decided directory with exactly its arguments, whatever the directory's name", () => {
  const root = Deno.realPathSync(tempDir());
  for (const name of ["plain", "trailing newline\n", "-dash", "a b$(x)"]) {
    const dir = join(root, name);
    Deno.mkdirSync(dir);
    const result = run(
      inDecidedCwd(dir, [
        "/bin/sh",
        "-c",
        'pwd -P; printf "[%s]" "$@"',
        "sh",
        "one",
        "two words",
        "",
      ]),
    );
    assert.deepEqual(result, {
      code: 0,
      stdout: `${dir}\n[one][two words][]`,
      stderr: "",
    }, JSON.stringify(name));
  }
});

Deno.test("inDecidedCwd: a cwd whose name now leads elsewhere, or nowhere, runs nothing: exit 126 and why", () => {
  const root = Deno.realPathSync(tempDir());
  const away = Deno.realPathSync(tempDir());
  Deno.symlinkSync(away, join(root, "swapped"));
  const marker = join(away, "ran");
  for (const cwd of [join(root, "swapped"), join(root, "gone")]) {
    const result = run(inDecidedCwd(cwd, ["/usr/bin/touch", marker]));
    assert.equal(CWD_MOVED_EXIT, 126);
    assert.deepEqual(result, {
      code: 126,
      stdout: "",
      stderr:
        `runner: the command did not run: its cwd ${cwd} is no longer that directory (replaced, or a link to elsewhere)\n`,
    }, cwd);
  }
  assert.throws(() => Deno.statSync(marker), "nothing ran");
});

Deno.test("inDecidedCwd: a program that is gone by the time it runs exits 127, the complaint naming the trampoline as runner-cwd", () => {
  const dir = Deno.realPathSync(tempDir());
  const result = run(inDecidedCwd(dir, [join(dir, "gone")]));
  assert.equal(result.code, 127);
  assert.equal(result.stdout, "");
  // dash: `runner-cwd: 1: exec: …: not found`; bash: `runner-cwd: line 1: …`.
  assert.match(result.stderr, /^runner-cwd: /);
  assert.ok(result.stderr.includes(join(dir, "gone")), result.stderr);
});
