import assert from "node:assert/strict";
import { join } from "node:path";
import { prepareAgentCommand } from "../../lib/providers.ts";
import type { RunEvent } from "../../lib/events.ts";
import { launchLocal } from "../../lib/locations/local.ts";
import { startRun } from "../../lib/run/engine.ts";
import {
  EventLog,
  fixtureConfig,
  grandchildConfig,
  type Harness,
  makeGate,
  withHarness,
} from "../engine_helpers.ts";
import {
  agentPids,
  assertAgentGone,
  isAlive,
  pathExists,
  tempDir,
} from "../helpers.ts";

Deno.test("a cancel while the location is still launching tears down the agent it starts later", async () => {
  const dir = tempDir();
  const pidFile = join(dir, "pids.json");
  const config = fixtureConfig([
    "--text",
    "late",
    "--grandchild",
    "--pid-file",
    pidFile,
  ]);
  const launch = prepareAgentCommand(config);
  const launchGate = Promise.withResolvers<void>();
  const launching = Promise.withResolvers<void>();
  const events: RunEvent[] = [];
  const handle = startRun({
    runId: "late-launch",
    input: { text: "hi" },
    config,
    sessionCwd: launch.cwd,
    emit: (event) => events.push(event),
    launch: async () => {
      launching.resolve();
      await launchGate.promise;
      const watcher = Deno.watchFs(dir);
      const transport = await launchLocal({ command: launch });
      // Hand the transport over only once the fixture has started its
      // grandchild (it writes the pid file atomically right after).
      for await (const _ of watcher) {
        if (pathExists(pidFile)) break;
      }
      watcher.close();
      return transport;
    },
  });
  await launching.promise;
  handle.cancel();
  launchGate.resolve();
  const result = await handle.done;
  assert.equal(result.status, "cancelled");
  assert.equal(
    events.filter((e) => e.type === "run.failed" || e.type === "run.completed")
      .length,
    1,
  );
  assertAgentGone(pidFile);
});

Deno.test("follow-ups a failing run could not answer come back in run.failed", async () => {
  // Listeners see an event a commit after it is stored: the follow-up is sent
  // at the store append of the first delta, while the agent is surely alive.
  let sent: ReturnType<Harness["manager"]["start"]> | undefined;
  let onAppend: ((event: RunEvent) => void) | undefined;
  await withHarness({ onAppend: (event) => onAppend?.(event) }, async (h) => {
    const gate = await makeGate();
    const config = fixtureConfig([
      "--gate-fifo",
      gate.path,
      "--exit-mid-prompt",
    ]);
    onAppend = (event) => {
      if (event.type === "message.delta" && !sent) {
        sent = h.manager.start({
          conversationId: "lost?",
          input: { text: "two" },
          config,
        });
      }
    };
    const { run } = await h.manager.start({
      conversationId: "lost?",
      input: { text: "one" },
      config,
    });
    const log = new EventLog(run);
    await log.waitFor((e) => e.type === "message.delta");
    assert.equal((await sent)?.kind, "steered");
    await run.done;
    const failed = log.events.at(-1)!;
    assert.equal(failed.type, "run.failed");
    assert.deepEqual(failed.data.unprocessed_inputs, [{ text: "two" }]);
  });
});

Deno.test("bad attachments are refused before any agent starts or any run is stored", async () => {
  await withHarness(async (h) => {
    const record = join(tempDir(), "record.jsonl");
    const config = fixtureConfig(["--record", record], {
      "max-attachment-mb": "0.001",
    });
    await assert.rejects(
      () =>
        h.manager.start({
          input: {
            text: "x",
            attachments: [{
              type: "file",
              name: "big.bin",
              content: btoa("z".repeat(4096)),
            }],
          },
          config,
        }),
      { code: "prompt.attachment_too_large" },
    );
    await assert.rejects(
      () =>
        h.manager.start({
          input: {
            text: "x",
            attachments: [{ type: "image", content: "@@not base64@@" }],
          },
          config,
        }),
      { code: "prompt.attachment_invalid" },
    );
    assert.equal((await h.store.listRuns({ limit: 10 })).length, 0);
    assert.throws(() => Deno.statSync(record));
  });
});

Deno.test("the terminal event comes after teardown: no process of the agent's group is left when it is emitted", async (t) => {
  const cases: Array<[string, string[], string]> = [
    ["run.completed", ["--text", "done"], "completed"],
    ["run.failed", ["--exit-mid-prompt"], "failed"],
  ];
  for (const [type, flags, status] of cases) {
    await t.step(type, async () => {
      await withHarness(async (h) => {
        const { config, pidFile } = grandchildConfig(flags);
        const { run } = await h.manager.start({
          input: { text: "hi" },
          config,
        });
        let aliveAtTerminal: number[] | undefined;
        run.subscribe((event) => {
          if (event.type === "run.completed" || event.type === "run.failed") {
            aliveAtTerminal = agentPids(pidFile).filter(isAlive);
          }
        });
        const result = await run.done;
        assert.equal(result.status, status);
        assert.deepEqual(
          aliveAtTerminal,
          [],
          `agent processes alive when ${type} was emitted`,
        );
      });
    });
  }
});
