/**
 * A warm agent over a real sshd: the second message of a conversation reuses
 * the remote agent through the same ssh connection, and stopping the pool
 * tears the remote process group down (a TERM-ignoring grandchild included).
 *
 * @module
 */

import { runnerLocations } from "../../lib/locations/runner_locations.ts";
import assert from "node:assert/strict";
import { join } from "node:path";
import { createReaperRegistry } from "../../lib/agent/reaper.ts";
import { parseRunConfig } from "../../lib/config.ts";
import { createRunManager } from "../../lib/run/manager.ts";
import { createWarmPool } from "../../lib/run/warm/pool.ts";
import { openStore } from "../../lib/store/open.ts";
import { EventLog } from "../engine_helpers.ts";
import {
  assertAgentGone,
  fixtureCommand,
  isAlive,
  tempDir,
} from "../helpers.ts";
import { SSHD_PATH, sshTargetConfig, startSshd } from "../ssh_helpers.ts";
import { recordByProcess } from "../warm_helpers.ts";

Deno.test({
  name:
    "remote-ssh: the second message is a prompt to the same remote agent; stopping the pool kills its remote group",
  ignore: !SSHD_PATH,
  async fn() {
    const sshd = await startSshd();
    const dataDir = tempDir();
    const store = await openStore({ dataDir });
    const pool = createWarmPool({ idleTimeout: 60, maxAgents: 2 });
    const manager = createRunManager({
      locations: runnerLocations(),
      store,
      warmPool: pool,
      registry: createReaperRegistry(join(dataDir, "agents")),
    });
    const record = join(tempDir(), "record.jsonl");
    const pidFile = join(tempDir(), "pids.json");
    const config = parseRunConfig({
      provider: "custom",
      location: "remote-ssh",
      "acp-command": fixtureCommand(
        "--record",
        record,
        "--grandchild",
        "--pid-file",
        pidFile,
      ),
      workspace: join(tempDir(), "remote-ws"),
      ...sshTargetConfig(sshd),
    });
    const send = async (text: string) => {
      const { run } = await manager.start({
        conversationId: "ssh",
        input: { text },
        config,
      });
      const log = new EventLog(run);
      assert.equal((await run.done).status, "completed");
      return log;
    };
    try {
      await send("one");
      const second = await send("two");
      assert.equal(second.ofType("run.started")[0].data.agent, "warm");
      assert.deepEqual(second.messages(), ["echo: two (turn 2)"]);
      const processes = recordByProcess(record);
      assert.equal(processes.length, 1);
      assert.deepEqual(processes[0].methods, [
        "initialize",
        "session/new",
        "session/prompt",
        "session/prompt",
      ]);
      assert.ok(isAlive(processes[0].pid), "the remote agent idles");
      await pool.close();
      assertAgentGone(pidFile);
    } finally {
      await pool.close();
      await store.close();
      await sshd.close();
    }
  },
});
