import assert from "node:assert/strict";
import { parseRunConfig } from "../../lib/config.ts";
import { EventLog, withHarness } from "../engine_helpers.ts";
import { ROOT, tempDir } from "../helpers.ts";

const STUCK = [
  Deno.execPath(),
  "run",
  "-A",
  `${ROOT}tests/fixtures/stuck_agent.ts`,
].join(" ");

/** A run config of the agent that stops reading stdin, with `extra` keys. */
function stuckConfig(extra: Record<string, unknown>) {
  return parseRunConfig({
    provider: "custom",
    "acp-command": STUCK,
    workspace: tempDir(),
    "langbot-assets-enabled": false,
    ...extra,
  });
}

Deno.test("an agent that stops reading stdin cannot hold a cancelled run open", async () => {
  await withHarness(async (h) => {
    const config = stuckConfig({
      "cancel-grace": 0.5,
    });
    // A prompt far larger than a pipe buffer: the write blocks for good.
    const { run } = await h.manager.start({
      input: { text: "x".repeat(4 * 1024 * 1024) },
      config,
    });
    const log = new EventLog(run);
    await log.waitFor((e) => e.type === "state.updated");
    run.handle.cancel();
    const result = await run.done;
    assert.equal(result.status, "cancelled");
    assert.equal(log.events.filter((e) => e.type === "run.failed").length, 1);
    const agents = [...Deno.readDirSync(`${h.dataDir}/agents`)];
    assert.equal(
      agents.length,
      0,
      "the agent's record is released only after its group is gone",
    );
  });
});

Deno.test("the run timeout also ends a run whose agent stopped reading", async () => {
  await withHarness(async (h) => {
    const config = stuckConfig({
      timeout: 1,
      "cancel-grace": 0.5,
    });
    const { run } = await h.manager.start({
      input: { text: "y".repeat(4 * 1024 * 1024) },
      config,
    });
    const log = new EventLog(run);
    await run.done;
    assert.equal(log.events.at(-1)?.data.code, "run.timeout");
  });
});

Deno.test("durations are bounded so a timer can hold them", () => {
  const base = { provider: "custom", "acp-command": "x", workspace: "/tmp" };
  assert.throws(
    () => parseRunConfig(base, { timeout: 3_000_000 }),
    /timeout: must be at most 2147483/,
  );
  assert.throws(
    () => parseRunConfig(base, { "late-update-ms": 2_200_000 }),
    /late-update-ms: must be at most 5000/,
  );
  assert.throws(
    () => parseRunConfig(base, { "cancel-grace": 30 }),
    /cancel-grace: must be at most 5/,
  );
  assert.equal(parseRunConfig(base, { timeout: 2_147_483 }).timeout, 2_147_483);
});

Deno.test("~/ in a local workspace means the runner user's home", () => {
  const config = parseRunConfig({
    provider: "custom",
    "acp-command": "x",
    workspace: "~/proj",
  });
  assert.equal(config.workspace, `${Deno.env.get("HOME")}/proj`);
});

Deno.test("a location this runner cannot serve, or a workspace it cannot create, stores nothing", async () => {
  await withHarness(async (h) => {
    const refused = [
      { location: "daemon", "daemon-id": "d1" },
      { workspace: "/proc/runner-test/ws" },
    ];
    for (const keys of refused) {
      await assert.rejects(
        () =>
          h.manager.start({
            input: { text: "hi" },
            config: parseRunConfig({
              provider: "custom",
              "acp-command": "x",
              ...keys,
            }),
          }),
        { code: "config.invalid" },
        JSON.stringify(keys),
      );
    }
    assert.equal((await h.store.listRuns({ limit: 10 })).length, 0);
  });
});

Deno.test("mcp-servers-json accepts JSON values as well as text", () => {
  const base = { provider: "custom", "acp-command": "x", workspace: "/tmp" };
  const servers = [{ name: "mine", command: "mine-mcp" }];
  assert.equal(
    parseRunConfig(base, { "mcp-servers-json": servers }).mcpServersJson,
    JSON.stringify(servers),
  );
});
