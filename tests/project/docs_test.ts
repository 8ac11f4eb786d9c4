import assert from "node:assert/strict";
import { RUN_CONFIG_KEYS } from "../../lib/config.ts";
import { configTableRows } from "../../scripts/config_table.ts";
import { ROOT } from "../helpers.ts";

Deno.test("docs/config.md documents every run-config key", () => {
  const text = Deno.readTextFileSync(`${ROOT}docs/config.md`);
  for (const key of Object.keys(RUN_CONFIG_KEYS)) {
    assert.ok(
      new RegExp(`^\\| \`${key}\`\\s*\\|`, "m").test(text),
      `${key} is missing from docs/config.md`,
    );
  }
});

Deno.test("docs/config.md's key table is exactly the run-config schema's keys, defaults and descriptions", () => {
  const text = Deno.readTextFileSync(`${ROOT}docs/config.md`);
  const from = text.slice(text.indexOf("| key "));
  // Only the key table: later tables (the preset pins) have rows like it.
  const table = from.slice(0, from.indexOf("\n\n"));
  const rows = table.split("\n")
    .filter((line) => line.startsWith("| `"))
    .map((line) => line.slice(1, -1).split(" | ").map((cell) => cell.trim()));
  assert.deepEqual(
    rows,
    configTableRows(),
    "regenerate the table with `deno task config-table` (then deno fmt)",
  );
});

Deno.test("the README's commands exist in deno.json and main.ts", () => {
  const readme = Deno.readTextFileSync(`${ROOT}README.md`);
  const tasks = JSON.parse(Deno.readTextFileSync(`${ROOT}deno.json`)).tasks;
  for (const match of readme.matchAll(/deno task ([a-z]+)/g)) {
    assert.ok(match[1] in tasks, `deno task ${match[1]} is not defined`);
  }
  const main = Deno.readTextFileSync(`${ROOT}main.ts`);
  for (
    const command of ["serve", "daemon", "probe", "run", "providers", "token"]
  ) {
    assert.ok(main.includes(`  ${command}:`), `${command} is not a subcommand`);
    assert.ok(
      readme.includes(`runner ${command}`),
      `README does not mention runner ${command}`,
    );
  }
});

Deno.test("deno task start uses exactly the runtime flags (permissions, V8 settings, deno run's own)", async () => {
  const { DENO_RUN_FLAGS } = await import(
    "../../lib/runtime_permissions.ts"
  );
  const tasks = JSON.parse(Deno.readTextFileSync(`${ROOT}deno.json`)).tasks;
  assert.equal(
    tasks.start,
    `deno run ${DENO_RUN_FLAGS.join(" ")} main.ts serve`,
  );
  assert.equal(
    tasks.runner,
    `deno run ${DENO_RUN_FLAGS.join(" ")} main.ts`,
  );
});

Deno.test("docs/events.md's table lists exactly the run event types", async () => {
  const { RUN_EVENT_TYPES } = await import("../../lib/events.ts");
  const text = await Deno.readTextFile(
    new URL("../../docs/events.md", import.meta.url),
  );
  const documented = [...text.matchAll(/^\| `([a-z_.]+)`\s*\|/gm)].map((m) =>
    m[1]
  );
  assert.deepEqual(documented, [...RUN_EVENT_TYPES]);
});
