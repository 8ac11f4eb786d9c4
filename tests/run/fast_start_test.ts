/**
 * Fast start: what each command loads before it does anything. `--version`,
 * `providers` and `probe` load neither the HTTP framework nor the store;
 * `runner run` loads the store, the assets bridge and the engine only once
 * it has a run to start (dynamic imports, after the arguments are checked).
 *
 * @module
 */

import assert from "node:assert/strict";
import { ROOT } from "../helpers.ts";

interface InfoModule {
  specifier: string;
  dependencies?: Array<{ code?: { specifier: string }; isDynamic?: boolean }>;
}

/** Every module `entry` loads before its code runs (static value imports). */
async function staticClosure(entry: string): Promise<Set<string>> {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", `${ROOT}${entry}`],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.ok(output.success, new TextDecoder().decode(output.stderr));
  const info = JSON.parse(new TextDecoder().decode(output.stdout)) as {
    roots: string[];
    modules: InfoModule[];
    redirects: Record<string, string>;
  };
  const bySpecifier = new Map(info.modules.map((m) => [m.specifier, m]));
  const seen = new Set<string>();
  const visit = (specifier: string) => {
    const resolved = info.redirects[specifier] ?? specifier;
    if (seen.has(resolved)) return;
    seen.add(resolved);
    for (const dependency of bySpecifier.get(resolved)?.dependencies ?? []) {
      if (dependency.code && !dependency.isDynamic) {
        visit(dependency.code.specifier);
      }
    }
  };
  info.roots.forEach(visit);
  return seen;
}

/** The modules of `loaded` that are the HTTP framework or the store. */
function heavy(loaded: Set<string>): string[] {
  return [...loaded].filter((specifier) =>
    /hono|node:sqlite|\/lib\/store\/(open|sqlite|schema)\.ts$|\/lib\/server\//
      .test(specifier)
  );
}

Deno.test("runner --version and --help load only the version", async () => {
  const loaded = await staticClosure("main.ts");
  assert.deepEqual(
    [...loaded].filter((s) => s.startsWith("file:")).map((s) =>
      s.slice(s.indexOf("/lib/") >= 0 ? s.indexOf("/lib/") : s.lastIndexOf("/"))
    ).sort(),
    ["/lib/version.ts", "/main.ts"],
  );
});

Deno.test("runner providers and runner probe load no HTTP framework and no store", async () => {
  for (const command of ["lib/cli/providers.ts", "lib/cli/probe.ts"]) {
    assert.deepEqual(heavy(await staticClosure(command)), [], command);
  }
});

Deno.test("runner run loads the store and the assets bridge only when it starts a run", async () => {
  const loaded = await staticClosure("lib/cli/run/command.ts");
  assert.deepEqual(heavy(loaded), []);
  assert.ok(
    ![...loaded].some((s) => s.endsWith("/lib/run/manager.ts")),
    "the engine is loaded up front",
  );
});

Deno.test("the engine loads the ACP SDK only after it has launched the agent", async () => {
  const loaded = await staticClosure("lib/run/manager.ts");
  assert.deepEqual(
    [...loaded].filter((s) => s.includes("agentclientprotocol")),
    [],
  );
});
