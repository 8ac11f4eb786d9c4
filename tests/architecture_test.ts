import assert from "node:assert/strict";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const LIB = fileURLToPath(new URL("../lib/", import.meta.url));

interface ImportEdge {
  from: string;
  to: string;
  typeOnly: boolean;
}

async function libFiles(dir = LIB): Promise<string[]> {
  const files: string[] = [];
  for await (const entry of Deno.readDir(dir)) {
    const path = join(dir, entry.name);
    if (entry.isDirectory) files.push(...await libFiles(path));
    else if (entry.name.endsWith(".ts")) files.push(path);
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

async function libGraph(): Promise<ImportEdge[]> {
  const edges: ImportEdge[] = [];
  for (const file of await libFiles()) {
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
        component.push(relative(LIB, member));
      } while (member !== node);
      if (component.length > 1) found.push(component.sort());
    }
  };
  for (const node of next.keys()) if (!index.has(node)) visit(node);
  return found;
}

function folderOf(path: string): string {
  const rel = relative(LIB, path);
  return rel.includes("/") ? rel.split("/")[0] : "";
}

Deno.test("the circle finder sees a circle of two modules and one of three", () => {
  const edge = (from: string, to: string) => ({
    from: join(LIB, from),
    to: join(LIB, to),
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
});

Deno.test("no two files of lib/ import each other, directly or around a circle", async () => {
  const edges = await libGraph();
  assert.ok(edges.length > 100, "the import scan found the imports");
  assert.deepEqual(circles(edges), []);
});

Deno.test("lib/ folders import only what docs/architecture.md allows", async () => {
  // folder → folders it must never import (see docs/architecture.md).
  const forbidden: Record<string, string[]> = {
    acp: [
      "agent",
      "assets",
      "cli",
      "daemon",
      "hub",
      "locations",
      "relay",
      "run",
      "server",
      "store",
    ],
    agent: [
      "acp",
      "assets",
      "cli",
      "daemon",
      "hub",
      "locations",
      "relay",
      "run",
      "server",
      "store",
    ],
    store: [
      "acp",
      "agent",
      "assets",
      "cli",
      "daemon",
      "hub",
      "locations",
      "relay",
      "run",
      "server",
    ],
    net: [
      "acp",
      "agent",
      "assets",
      "cli",
      "daemon",
      "hub",
      "locations",
      "relay",
      "run",
      "server",
      "store",
    ],
    hub: [
      "acp",
      "agent",
      "assets",
      "cli",
      "daemon",
      "locations",
      "run",
      "server",
      "store",
    ],
    // The peer contracts (JSON Schemas) are data: they import nothing of lib/.
    contracts: [
      "acp",
      "agent",
      "assets",
      "cli",
      "daemon",
      "hub",
      "locations",
      "relay",
      "run",
      "server",
      "store",
    ],
    // run/ defines the location interface; locations/ implement it.
    run: ["cli", "daemon", "hub", "locations", "server"],
    server: ["cli", "daemon", "hub"],
    relay: ["cli", "daemon", "hub", "server", "store"],
    daemon: ["cli", "hub", "server", "store"],
    assets: ["cli", "daemon", "hub", "server", "store"],
    locations: ["cli", "server", "store"],
    "": ["cli", "server", "hub", "daemon", "store"],
  };
  const broken: string[] = [];
  for (const edge of await libGraph()) {
    const from = folderOf(edge.from);
    const to = folderOf(edge.to);
    if (from === to) continue;
    if (forbidden[from]?.includes(to)) {
      broken.push(`${relative(LIB, edge.from)} → ${relative(LIB, edge.to)}`);
    }
    if (from === "run" && to === "store" && !edge.typeOnly) {
      broken.push(
        `${relative(LIB, edge.from)} → ${
          relative(LIB, edge.to)
        } (run/ may only name the store's types)`,
      );
    }
  }
  assert.deepEqual(broken, []);
});

Deno.test("every run the runner starts goes through run/agent_run.ts: no other lib/ file starts the engine", async () => {
  const starters: string[] = [];
  for (const file of await libFiles()) {
    const code = await Deno.readTextFile(file);
    if (/import\s*\{[^}]*\bstartRun\b[^}]*\}\s*from/.test(code)) {
      starters.push(relative(LIB, file));
    }
  }
  assert.deepEqual(starters, ["run/agent_run.ts"]);
});

Deno.test("lib/run/warm/ sits below the engine: it names only the engine's types and shared files", async () => {
  const allowed = (to: string) => {
    const rel = relative(LIB, to);
    return rel.startsWith("run/warm/") || rel === "run/types.ts" ||
      !rel.includes("/");
  };
  const broken = (await libGraph())
    .filter((edge) => relative(LIB, edge.from).startsWith("run/warm/"))
    .filter((edge) => !allowed(edge.to))
    .map((edge) => `${relative(LIB, edge.from)} → ${relative(LIB, edge.to)}`);
  assert.deepEqual(broken, []);
});

Deno.test("lib/ keeps few files at its top and no folder repeats its name as a file prefix", async () => {
  const top: string[] = [];
  const folders: string[] = [];
  for await (const entry of Deno.readDir(LIB)) {
    (entry.isDirectory ? folders : top).push(entry.name);
  }
  // 13: config_schema.ts, the run config described once, sits beside config.ts.
  assert.ok(top.length <= 13, `lib/ has ${top.length} files: ${top.sort()}`);
  // 13: contracts/ holds the peers' schemas that tests and docs check
  // against; net/, the listeners every HTTP and WebSocket endpoint shares.
  assert.ok(folders.length <= 13, `lib/ has ${folders.length} folders`);
  const prefixed = (await libFiles())
    .map((file) => relative(LIB, file))
    .filter((rel) => rel.includes("/"))
    .filter((rel) => {
      const [folder, name] = rel.split("/");
      const stem = folder.replace(/s$/, "");
      return name.startsWith(`${folder}_`) || name.startsWith(`${stem}_`) ||
        name === `${folder}.ts`;
    });
  assert.deepEqual(prefixed, []);
});
