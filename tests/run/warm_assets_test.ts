/**
 * A warm agent's LangBot assets: the MCP endpoint its session was created
 * with stays (same URL and token) for as long as the agent is warm, while
 * what it answers follows the run that holds the agent now. Real run
 * manager, real bridge over HTTP, the fixture agent calling it every turn.
 *
 * @module
 */

import { runnerLocations } from "../../lib/locations/runner_locations.ts";
import assert from "node:assert/strict";
import { join } from "node:path";
import { createReaperRegistry } from "../../lib/agent/reaper.ts";
import type { RunAssetsRequest } from "../../lib/assets/request.ts";
import { createAssetsHook } from "../../lib/assets/wiring.ts";
import { createRunManager } from "../../lib/run/manager.ts";
import { createWarmPool } from "../../lib/run/warm/pool.ts";
import { openStore } from "../../lib/store/open.ts";
import { EventLog, fixtureConfig } from "../engine_helpers.ts";
import { readRecord, tempDir } from "../helpers.ts";
import { recordByProcess } from "../warm_helpers.ts";
import { listAssetsStatus } from "../assets_test_helpers.ts";

type Line = Record<string, unknown>;

/** The assets of one message: its event, and a grant of `kbs`. */
function assetsOf(text: string, kbs: string[]): RunAssetsRequest {
  return {
    event: { type: "message", text },
    grant: {
      knowledge_bases: kbs.map((kb_id) => ({
        kb_id,
        name: kb_id,
        operations: ["retrieve"],
      })),
    },
    inline: { knowledge: [] },
  } as unknown as RunAssetsRequest;
}

/** The structured results of every `tools/call` the agent made, in order. */
function toolResults(record: Line[]): Record<string, unknown>[] {
  return record
    .filter((line) =>
      line.event === "mcp" && line.server === "langbot_assets" &&
      line.method === "tools/call"
    )
    .map((line) =>
      (line.body as { result: { structuredContent: Record<string, unknown> } })
        .result.structuredContent
    );
}

Deno.test("a warm agent's assets endpoint stays, and answers with the grant of the run that holds it", async () => {
  const dataDir = tempDir();
  const store = await openStore({ dataDir });
  const hook = createAssetsHook({ log: () => {} });
  const warmPool = createWarmPool({ idleTimeout: 60, maxAgents: 4 });
  const manager = createRunManager({
    locations: runnerLocations(),
    store,
    assets: hook,
    warmPool,
    registry: createReaperRegistry(join(dataDir, "agents")),
  });
  const record = join(tempDir(), "record.jsonl");
  const config = fixtureConfig([
    "--mcp-http",
    "--mcp-call",
    "--mcp-tool",
    "langbot_list_assets",
    "--mcp-args",
    "{}",
    "--record",
    record,
  ]);
  const send = async (text: string, assets: RunAssetsRequest) => {
    const { run } = await manager.start({
      conversationId: "chat",
      input: { text },
      config,
      assets,
    });
    const log = new EventLog(run);
    assert.equal((await run.done).status, "completed");
    return { runId: run.runId, log };
  };
  try {
    const first = await send("one", assetsOf("first", ["kb-one"]));
    const entry = (readRecord(record).find((line) =>
      line.method === "session/new"
    )!.params as { mcpServers: Line[] }).mcpServers.find((server) =>
      server.name === "langbot_assets"
    )!;
    // Between runs nobody's grant answers on the agent's token.
    assert.equal(await listAssetsStatus(entry), 401);

    const second = await send("two", assetsOf("second", ["kb-two"]));
    assert.equal(second.log.ofType("run.started")[0].data.agent, "warm");
    assert.equal(recordByProcess(record).length, 1, "one agent process");
    const [one, two] = toolResults(readRecord(record));
    assert.equal(one.run_id, first.runId);
    assert.deepEqual(
      (one.knowledge_bases as { kb_id: string }[]).map((kb) => kb.kb_id),
      ["kb-one"],
    );
    assert.equal(two.run_id, second.runId);
    assert.deepEqual(
      (two.knowledge_bases as { kb_id: string }[]).map((kb) => kb.kb_id),
      ["kb-two"],
    );
    assert.equal(await listAssetsStatus(entry), 401);
  } finally {
    await warmPool.close();
    await hook.close();
    await store.close();
  }
});
