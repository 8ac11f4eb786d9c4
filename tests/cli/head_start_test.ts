import assert from "node:assert/strict";
import { dirname, join } from "node:path";
import { prepareAgentCommand } from "../../lib/providers.ts";
import { startAgentAhead } from "../../lib/cli/run/head_start.ts";
import { parseRunConfig } from "../../lib/config.ts";
import {
  customRunArgs,
  fixtureCommand,
  isAlive,
  pathExists,
  spawnCli,
  tempDir,
} from "../helpers.ts";

function configFor(...flags: string[]) {
  return parseRunConfig({
    provider: "custom",
    "acp-command": fixtureCommand(...flags),
    workspace: join(tempDir(), "ws"),
  });
}

/** The `.json` records of agent groups left in `dir`. */
function groupRecords(dir: string): string[] {
  return [...Deno.readDirSync(dir)].map((entry) => entry.name)
    .filter((name) => name.endsWith(".json"));
}

Deno.test("the agent started ahead goes to the launch of its own command, once", async () => {
  const agentsDir = join(tempDir(), "agents");
  const config = configFor("--text", "ahead");
  const ahead = startAgentAhead({ config, agentsDir });
  assert.ok(ahead, "a local run's agent is started ahead");
  const taken = ahead.take(prepareAgentCommand(config));
  assert.ok(taken);
  assert.equal(ahead.take(prepareAgentCommand(config)), undefined);
  const transport = await taken;
  await ahead.discard(); // taken: the run tears it down, not the head start
  assert.equal(groupRecords(agentsDir).length, 1);
  await transport.teardown();
  assert.deepEqual(groupRecords(agentsDir), []);
});

Deno.test("an agent started ahead for another command is torn down, grandchild and all", async () => {
  const agentsDir = join(tempDir(), "agents");
  const pidFile = join(tempDir(), "pids.json");
  const config = configFor(
    "--text",
    "ahead",
    "--grandchild",
    "--pid-file",
    pidFile,
  );
  const watcher = Deno.watchFs(dirname(pidFile));
  const ahead = startAgentAhead({ config, agentsDir });
  assert.ok(ahead);
  // Torn down only once the fixture has started its SIGTERM-ignoring
  // grandchild (it writes the pid file atomically right after).
  for await (const _ of watcher) {
    if (pathExists(pidFile)) break;
  }
  watcher.close();
  const other = prepareAgentCommand(configFor("--text", "another"));
  assert.equal(ahead.take(other), undefined);
  await ahead.discard();
  assert.deepEqual(groupRecords(agentsDir), []);
  const pids: Record<string, number> = JSON.parse(
    Deno.readTextFileSync(pidFile),
  );
  assert.ok(pids.grandchild_pid);
  for (const pid of Object.values(pids)) {
    assert.equal(isAlive(pid), false, `pid ${pid} survived`);
  }
  assert.equal(ahead.take(prepareAgentCommand(config)), undefined);
});

Deno.test("a run whose agent does not start here gets no head start", () => {
  const agentsDir = join(tempDir(), "agents");
  const remote = parseRunConfig({
    provider: "custom",
    "acp-command": fixtureCommand("--text", "x"),
    location: "remote-ssh",
    "ssh-target": "user@example.invalid",
  });
  assert.equal(startAgentAhead({ config: remote, agentsDir }), undefined);
  const missing = configFor("--text", "x");
  missing.acpCommand = join(tempDir(), "no-such-agent");
  assert.equal(startAgentAhead({ config: missing, agentsDir }), undefined);
});

Deno.test("a signal as soon as runner run's agent is started ahead ends the command and leaves no process of the agent's group", async () => {
  const { processGroupMembers } = await import(
    "../../lib/agent/process_table.ts"
  );
  for (
    const [signal, code] of [["SIGTERM", 143], ["SIGINT", 130], [
      "SIGHUP",
      129,
    ]] as const
  ) {
    const dataDir = tempDir();
    const agentsDir = join(dataDir, "agents");
    Deno.mkdirSync(agentsDir, { recursive: true });
    const watcher = Deno.watchFs(agentsDir);
    const child = spawnCli(
      customRunArgs(
        fixtureCommand("--stall-prompt", "--grandchild"),
        join(tempDir(), "ws"),
        ["--data-dir", dataDir, "--langbot-assets-enabled", "false", "hi"],
      ),
    );
    let pgid: number | undefined;
    // The group's record is written right after the spawn, before the
    // engine, the store and the SDK load: signal the runner at that moment.
    for await (const _ of watcher) {
      const [record] = groupRecords(agentsDir);
      if (!record) continue;
      try {
        pgid = JSON.parse(Deno.readTextFileSync(join(agentsDir, record))).pgid;
      } catch {
        continue;
      } // still being written
      break;
    }
    watcher.close();
    child.kill(signal);
    const status = await child.status;
    await child.stdout.cancel();
    await child.stderr.cancel();
    assert.equal(status.code, code, signal);
    assert.ok(pgid);
    assert.deepEqual(await processGroupMembers(pgid), [], signal);
    assert.deepEqual(groupRecords(agentsDir), [], signal);
  }
});
