/**
 * Compiles the `runner` binary for this host with the runtime permission set
 * (`lib/runtime_permissions.ts`). `deno compile` needs Deno's runtime
 * (`denort`): set `DENORT_BIN` to a local copy where Deno's download site is
 * unreachable. Usage: `deno task compile [--output PATH] [--target TRIPLE]`.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { RUNTIME_FLAGS } from "../lib/runtime_permissions.ts";

/** The arguments `deno compile` gets. */
export function compileArgs(
  options: { output: string; target?: string },
): string[] {
  return [
    "compile",
    ...RUNTIME_FLAGS,
    ...(options.target ? ["--target", options.target] : []),
    "--output",
    options.output,
    "main.ts",
  ];
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: { output: { type: "string" }, target: { type: "string" } },
  });
  const output = values.output ?? "dist/runner";
  const denort = Deno.env.get("DENORT_BIN");
  if (denort) console.error(`using DENORT_BIN=${denort}`);
  const result = await new Deno.Command(Deno.execPath(), {
    args: compileArgs({ output, target: values.target }),
    stdout: "inherit",
    stderr: "piped",
  }).output();
  const stderr = new TextDecoder().decode(result.stderr);
  Deno.stderr.writeSync(result.stderr);
  if (!result.success) {
    if (
      !denort &&
      /download|dl\.deno\.land|error sending request|dns|connect/i.test(stderr)
    ) {
      console.error(
        "\ncompile failed: Deno's runtime (denort) could not be downloaded. " +
          "Set DENORT_BIN to the path of a denort binary of the same Deno version " +
          "(2.9.6) and run again.",
      );
    }
    Deno.exit(result.code || 1);
  }
  console.error(`compiled ${output}`);
}
