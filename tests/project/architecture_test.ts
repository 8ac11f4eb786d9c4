/**
 * The shape of the house (`docs/architecture.md`): no import circle anywhere
 * in the repository, the order of `lib/`'s folders (who may import whom, top
 * to bottom) exactly as the document states it, and few files at `lib/`'s
 * top.
 *
 * @module
 */

import assert from "node:assert/strict";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { coveredByLengthRule } from "../../scripts/lint_plugin.ts";
import { CONSOLE_MODULES } from "../../lib/server/console_modules.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const LIB = join(ROOT, "lib/");

interface ImportEdge {
  from: string;
  to: string;
  typeOnly: boolean;
}

/**
 * Every `.ts` file under `dir`, and the console's browser modules (`.js`),
 * but what the repository does not own.
 */
async function tsFiles(dir: string): Promise<string[]> {
  const files: string[] = [];
  for await (const entry of Deno.readDir(dir)) {
    const path = join(dir, entry.name);
    if (entry.isDirectory) {
      if (![".git", "node_modules"].includes(entry.name)) {
        files.push(...await tsFiles(path));
      }
    } else if (/\.[tj]s$/.test(entry.name)) files.push(path);
  }
  return files.sort();
}

/** Every relative import and re-export of a module, with whether it is type-only. */
function importsOf(file: string, text: string): ImportEdge[] {
  const edges: ImportEdge[] = [];
  const code = text.replace(/\/\*[\s\S]*?\*\//g, "").replace(
    /^\s*\/\/.*$/gm,
    "",
  );
  const patterns = [
    /\b(?:import|export)\s+(type\s+)?(?:[^'";]*?\s+from\s+)?["'](\.{1,2}\/[^"']+)["']/g,
    /\bimport\(\s*["'](\.{1,2}\/[^"']+)["']\s*\)/g,
  ];
  for (const match of code.matchAll(patterns[0])) {
    edges.push({
      from: file,
      to: resolve(dirname(file), match[2]),
      typeOnly: Boolean(match[1]),
    });
  }
  for (const match of code.matchAll(patterns[1])) {
    edges.push({
      from: file,
      to: resolve(dirname(file), match[1]),
      typeOnly: false,
    });
  }
  return edges;
}

/** The import graph of every `.ts` file under `dir`. */
async function importGraph(dir: string): Promise<ImportEdge[]> {
  const edges: ImportEdge[] = [];
  for (const file of await tsFiles(dir)) {
    edges.push(...importsOf(file, await Deno.readTextFile(file)));
  }
  return edges;
}

/** The strongly connected components with more than one file (Tarjan). */
function circles(edges: ImportEdge[]): string[][] {
  const next = new Map<string, string[]>();
  for (const edge of edges) {
    if (!next.has(edge.from)) next.set(edge.from, []);
    next.get(edge.from)!.push(edge.to);
  }
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (node: string) => {
    index.set(node, counter);
    low.set(node, counter++);
    stack.push(node);
    onStack.add(node);
    for (const target of next.get(node) ?? []) {
      if (!index.has(target)) {
        visit(target);
        low.set(node, Math.min(low.get(node)!, low.get(target)!));
      } else if (onStack.has(target)) {
        low.set(node, Math.min(low.get(node)!, index.get(target)!));
      }
    }
    if (low.get(node) === index.get(node)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(relative(ROOT, member));
      } while (member !== node);
      if (component.length > 1) found.push(component.sort());
    }
  };
  for (const node of next.keys()) if (!index.has(node)) visit(node);
  return found;
}

/**
 * The order of the house, top to bottom, as docs/architecture.md states it:
 * each part and the parts below it that it may import. A part is a folder of
 * `lib/`; `relay/` includes the codec `lib/relay.ts`; `probe.ts`,
 * `mcp_proxy.ts` and `providers.ts` sit at `lib/`'s top but in the order where
 * their imports put them; `lib/*.ts` are the other files at `lib/`'s top, which everything
 * shares; `main.ts` stands for the two entry points, `main.ts` and
 * `daemon.ts`.
 */
const ORDER: ReadonlyArray<readonly [string, readonly string[]]> = [
  ["main.ts", [
    "cli/",
    "daemon/",
    "run/",
    "assets/",
    "hub/",
    "relay/",
    "store/",
    "agent/",
    "lib/*.ts",
  ]],
  ["cli/", [
    "server/",
    "probe.ts",
    "locations/",
    "run/",
    "assets/",
    "hub/",
    "providers.ts",
    "store/",
    "acp/",
    "agent/",
    "net/",
    "lib/*.ts",
  ]],
  ["server/", [
    "run/",
    "assets/",
    "providers.ts",
    "store/",
    "agent/",
    "net/",
    "lib/*.ts",
  ]],
  ["daemon/", [
    "mcp_proxy.ts",
    "locations/",
    "run/",
    "relay/",
    "providers.ts",
    "agent/",
    "lib/*.ts",
  ]],
  ["probe.ts", ["locations/", "run/", "acp/", "agent/", "lib/*.ts"]],
  ["mcp_proxy.ts", ["relay/", "net/"]],
  ["locations/", [
    "run/",
    "assets/",
    "hub/",
    "relay/",
    "acp/",
    "agent/",
    "lib/*.ts",
  ]],
  ["run/", [
    "assets/",
    "providers.ts",
    "store/",
    "acp/",
    "agent/",
    "lib/*.ts",
  ]],
  ["assets/", ["net/", "lib/*.ts"]],
  ["hub/", ["relay/", "net/", "lib/*.ts"]],
  ["relay/", ["contracts/", "providers.ts", "agent/", "lib/*.ts"]],
  ["providers.ts", ["agent/", "lib/*.ts"]],
  ["store/", ["agent/", "lib/*.ts"]],
  ["acp/", ["lib/*.ts"]],
  ["agent/", ["lib/*.ts"]],
  ["net/", ["lib/*.ts"]],
  ["contracts/", []],
  ["lib/*.ts", []],
];

/**
 * Imports that go up the order today, each named. This list must shrink to
 * empty and never grow: the test fails on a back edge not listed here, and on
 * a listed one that is gone (delete its line then).
 */
const KNOWN_BACK_EDGES: readonly string[] = [
  // The run request's vocabulary (prompt blocks, attachments, the request
  // types) sits in run/ while assets/ and relay/ below it read it; these go
  // when that vocabulary moves below them.
  "lib/assets/run_spec.ts → lib/run/prompt.ts",
  "lib/assets/wiring.ts → lib/run/request.ts",
  "lib/relay/input.ts → lib/run/attachments.ts",
  "lib/relay/input.ts → lib/run/prompt.ts",
  "lib/relay/payload.ts → lib/run/prompt.ts",
];

/**
 * What `locations/` may import of `run/`: the location interface and the
 * engine's transport types, never the run's internals (`docs/architecture.md`).
 */
const LOCATION_FACING_RUN_FILES = ["lib/run/location.ts", "lib/run/types.ts"];

/** The part of the order a file belongs to (undefined: outside the order). */
function partOf(path: string): string | undefined {
  const rel = relative(ROOT, path);
  if (rel === "main.ts" || rel === "daemon.ts") return "main.ts";
  if (!rel.startsWith("lib/")) return undefined;
  const [first, ...rest] = rel.slice("lib/".length).split("/");
  if (rest.length) return `${first}/`;
  if (first === "relay.ts") return "relay/";
  if (["probe.ts", "mcp_proxy.ts", "providers.ts"].includes(first)) {
    return first;
  }
  return "lib/*.ts";
}

/** The imports that break the order, as "from → to" (repository paths). */
function orderBreaks(edges: ImportEdge[]): string[] {
  const allowed = new Map(ORDER.map(([part, below]) => [part, below]));
  const broken = new Set<string>();
  for (const edge of edges) {
    const from = partOf(edge.from);
    const to = partOf(edge.to);
    if (!from || !to || from === to) continue;
    const name = `${relative(ROOT, edge.from)} → ${relative(ROOT, edge.to)}`;
    if (!allowed.get(from)?.includes(to)) broken.add(name);
    else if (from === "run/" && to === "store/" && !edge.typeOnly) {
      broken.add(`${name} (run/ may only name the store's types)`);
    } else if (
      from === "locations/" && to === "run/" &&
      !LOCATION_FACING_RUN_FILES.includes(relative(ROOT, edge.to))
    ) {
      broken.add(
        `${name} (locations/ may only import run/location.ts and run/types.ts)`,
      );
    }
  }
  return [...broken].sort();
}

/** The order as docs/architecture.md's table "Who may import whom" states it. */
function documentedOrder(): [string, string[]][] {
  const text = Deno.readTextFileSync(join(ROOT, "docs/architecture.md"));
  const from = text.indexOf("## Who may import whom");
  const section = text.slice(from, text.indexOf("\n## ", from + 1));
  const spans = (cell: string) =>
    [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]);
  return section.split("\n")
    .filter((line) => line.startsWith("| `"))
    .map((line) => line.split("|").slice(1, -1))
    .map(([part, below]) => [spans(part)[0], spans(below)]);
}

Deno.test("the circle finder sees a circle of two modules and one of three", () => {
  const edge = (from: string, to: string) => ({
    from: join(ROOT, from),
    to: join(ROOT, to),
    typeOnly: false,
  });
  assert.deepEqual(
    circles([edge("a.ts", "b.ts"), edge("b.ts", "a.ts"), edge("c.ts", "a.ts")]),
    [["a.ts", "b.ts"]],
  );
  assert.deepEqual(
    circles([
      edge("x/a.ts", "y/b.ts"),
      edge("y/b.ts", "c.ts"),
      edge("c.ts", "x/a.ts"),
    ]),
    [["c.ts", "x/a.ts", "y/b.ts"]],
  );
  assert.deepEqual(
    importsOf(
      join(LIB, "run/x.ts"),
      'import type {\n  A,\n} from "../store/types.ts";\nexport { b } from "./b.ts";\nawait import("../c.ts");',
    )
      .map((e) => [relative(LIB, e.to), e.typeOnly]),
    [["store/types.ts", true], ["run/b.ts", false], ["c.ts", false]],
  );
  assert.deepEqual(
    importsOf(join(LIB, "x.ts"), 'import "./side.ts";\n// import "./no.ts";')
      .map((e) => relative(LIB, e.to)),
    ["side.ts"],
  );
});

Deno.test("no two files of the repository import each other, directly or around a circle", async () => {
  const edges = await importGraph(ROOT);
  assert.ok(edges.length > 1000, "the import scan found the imports");
  for (const part of ["main.ts", "daemon.ts", "scripts/", "tests/"]) {
    assert.ok(
      edges.some((edge) => relative(ROOT, edge.from).startsWith(part)),
      `the import scan reads ${part}`,
    );
  }
  assert.deepEqual(circles(edges), []);
});

Deno.test("the order of lib/'s folders is docs/architecture.md's, top to bottom", () => {
  assert.deepEqual(
    documentedOrder(),
    ORDER.map(([part, below]) => [part, [...below]]),
  );
  const parts = ORDER.map(([part]) => part);
  for (const [index, [part, below]] of ORDER.entries()) {
    for (const lower of below) {
      assert.ok(
        parts.indexOf(lower) > index,
        `${part} may import ${lower}, which is not below it`,
      );
    }
  }
});

Deno.test("lib/, main.ts and daemon.ts import only down the order (but for the known back edges)", async () => {
  const edges = [
    ...await importGraph(LIB),
    ...importsOf(
      join(ROOT, "main.ts"),
      await Deno.readTextFile(join(ROOT, "main.ts")),
    ),
    ...importsOf(
      join(ROOT, "daemon.ts"),
      await Deno.readTextFile(join(ROOT, "daemon.ts")),
    ),
  ];
  const broken = orderBreaks(edges);
  assert.deepEqual(
    broken.filter((edge) => !KNOWN_BACK_EDGES.includes(edge)),
    [],
  );
  assert.deepEqual(
    KNOWN_BACK_EDGES.filter((edge) => !broken.includes(edge)),
    [],
    "a known back edge is gone: delete it from KNOWN_BACK_EDGES",
  );
});

Deno.test("the function-length rule covers lib/, main.ts, daemon.ts and scripts/", () => {
  for (
    const path of [
      "lib/run/engine.ts",
      "main.ts",
      "daemon.ts",
      "scripts/bench.ts",
    ]
  ) {
    assert.ok(coveredByLengthRule(join(ROOT, path)), path);
  }
  for (const path of ["tests/helpers.ts", "tests/fixtures/agent.ts"]) {
    assert.ok(!coveredByLengthRule(join(ROOT, path)), path);
  }
});

Deno.test("every run the runner starts goes through run/agent_run.ts: no other lib/ file starts the engine", async () => {
  const starters: string[] = [];
  for (const file of await tsFiles(LIB)) {
    const code = await Deno.readTextFile(file);
    if (/import\s*\{[^}]*\bstartRun\b[^}]*\}\s*from/.test(code)) {
      starters.push(relative(LIB, file));
    }
  }
  assert.deepEqual(starters, ["run/agent_run.ts"]);
});

Deno.test("lib/run/warm/ sits below the engine: it names only the engine's types, the ACP client (for session/close) and shared files", async () => {
  const allowed = (to: string) => {
    const rel = relative(LIB, to);
    return rel.startsWith("run/warm/") || rel === "run/types.ts" ||
      rel.startsWith("acp/") ||
      !rel.includes("/");
  };
  const broken = (await importGraph(LIB))
    .filter((edge) => relative(LIB, edge.from).startsWith("run/warm/"))
    .filter((edge) => !allowed(edge.to))
    .map((edge) => `${relative(LIB, edge.from)} → ${relative(LIB, edge.to)}`);
  assert.deepEqual(broken, []);
});

Deno.test("lib/ keeps few files at its top and no folder (nor sub-folder) repeats its name as a file prefix", async () => {
  const top: string[] = [];
  const folders: string[] = [];
  for await (const entry of Deno.readDir(LIB)) {
    (entry.isDirectory ? folders : top).push(entry.name);
  }
  // 13: config_schema.ts, the run config described once, sits beside config.ts.
  assert.ok(top.length <= 14, `lib/ has ${top.length} files: ${top.sort()}`);
  // 13: contracts/ holds the peers' schemas that tests and docs check
  // against; net/, the listeners every HTTP and WebSocket endpoint shares.
  assert.ok(folders.length <= 13, `lib/ has ${folders.length} folders`);
  const prefixed = (await tsFiles(LIB))
    .map((file) => relative(LIB, file))
    .filter((rel) => rel.includes("/"))
    .filter((rel) => {
      const [folder, name] = rel.split("/").slice(-2);
      const stem = folder.replace(/s$/, "");
      return name.startsWith(`${folder}_`) || name.startsWith(`${stem}_`) ||
        name === `${folder}.ts`;
    });
  assert.deepEqual(prefixed, []);
});

Deno.test("lib/server/console/ is browser code: checked JavaScript that imports only its own modules and the two libraries, which the runner reads only as text", async () => {
  const browser = join(LIB, "server/console/");
  const modules = (await tsFiles(ROOT)).filter((file) => file.endsWith(".js"));
  assert.ok(modules.length > 1, "the scan found the console's modules");
  assert.deepEqual(
    modules.filter((file) => !file.startsWith(browser)),
    [],
    "JavaScript outside lib/server/console/",
  );
  const strays: string[] = [];
  for (const file of modules) {
    const text = await Deno.readTextFile(file);
    assert.ok(
      text.startsWith('// @ts-check\n/// <reference lib="dom" />\n'),
      `${
        relative(ROOT, file)
      } must start with // @ts-check and the DOM's types`,
    );
    const imports = text.matchAll(
      /^\s*(?:import\s*|(?:import|export)\b[^'";]*?\bfrom\s*)["']([^"']+)["']/gm,
    );
    for (const [, specifier] of imports) {
      const own = specifier.startsWith("./") &&
        dirname(resolve(dirname(file), specifier)) + "/" === browser;
      if (!own && !["marked", "dompurify"].includes(specifier)) {
        strays.push(`${relative(ROOT, file)} → ${specifier}`);
      }
    }
  }
  assert.deepEqual(strays, []);
  const asCode: string[] = [];
  for (const file of await tsFiles(ROOT)) {
    if (!file.endsWith(".ts")) continue;
    const text = await Deno.readTextFile(file);
    const imports = text.matchAll(
      /(?:from|import)\s*\(?\s*["'](\.{1,2}\/[^"']+)["']\s*(with\s*\{\s*type:\s*["']text["']\s*,?\s*\})?/g,
    );
    for (const [, specifier, asText] of imports) {
      if (resolve(dirname(file), specifier).startsWith(browser) && !asText) {
        asCode.push(`${relative(ROOT, file)} → ${specifier}`);
      }
    }
  }
  assert.deepEqual(asCode, [], "a console module imported as code");
  const served = Object.keys(CONSOLE_MODULES).sort();
  assert.deepEqual(
    served,
    modules.map((file) => relative(browser, file)).sort(),
    "lib/server/console_modules.ts serves every module of the folder",
  );
  for (const name of served) {
    assert.equal(
      CONSOLE_MODULES[name],
      await Deno.readTextFile(join(browser, name)),
      `${name} is served as its own text`,
    );
  }
});
