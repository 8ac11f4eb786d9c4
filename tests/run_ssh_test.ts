import assert from "node:assert/strict";
import { join } from "node:path";
import { parseRunConfig } from "../lib/config.ts";
import { EventLog, harness } from "./engine_helpers.ts";
import {
  assertAgentGone,
  fixtureCommand,
  readRecord,
  tempDir,
} from "./helpers.ts";
import { SSHD_PATH, startSshd, type TestSshd } from "./ssh_helpers.ts";

function sshConfig(
  sshd: TestSshd,
  flags: string[],
  extra: Record<string, unknown> = {},
) {
  return parseRunConfig({
    provider: "custom",
    location: "remote-ssh",
    "acp-command": fixtureCommand(...flags),
    workspace: join(tempDir(), "remote-ws"),
    "ssh-target": sshd.target,
    "ssh-port": sshd.port,
    "ssh-identity-file": sshd.identityFile,
    "ssh-extra-options": sshd.extraOptions,
    ...extra,
  });
}

Deno.test({
  name:
    "remote-ssh: a run streams over a real sshd, env-json crosses, the session survives, teardown kills the remote group",
  ignore: !SSHD_PATH,
  async fn() {
    const sshd = await startSshd();
    const h = harness();
    try {
      const record = join(tempDir(), "record.jsonl");
      const pidFile = join(tempDir(), "pids.json");
      const state = tempDir();
      const flags = [
        "--resume",
        "--state-dir",
        state,
        "--record",
        record,
        "--grandchild",
        "--pid-file",
        pidFile,
      ];
      const config = sshConfig(sshd, flags, {
        "env-json": { REMOTE_SECRET: "remote-secret-value" },
      });
      const first = await h.manager.start({
        conversationId: "ssh",
        input: { text: "one" },
        config,
      });
      const log = new EventLog(first.run);
      const result = await first.run.done;
      assert.equal(
        result.status,
        "completed",
        JSON.stringify(log.events.at(-1)),
      );
      assert.deepEqual(log.messages(), ["echo: one (turn 1)"]);
      const start = readRecord(record).find((line) => line.event === "start")!;
      assert.equal(
        (start.env as Record<string, string>).REMOTE_SECRET,
        "remote-secret-value",
      );
      assert.equal(start.argv !== undefined, true);
      assertAgentGone(pidFile);
      assert.ok(!JSON.stringify(log.events).includes("remote-secret-value"));
      const second = await h.manager.start({
        conversationId: "ssh",
        input: { text: "two" },
        config,
      });
      const secondLog = new EventLog(second.run);
      await second.run.done;
      assert.deepEqual(secondLog.messages(), ["echo: two (turn 2)"]);
    } finally {
      await h.close();
      await sshd.close();
    }
  },
});

Deno.test({
  name: "remote-ssh: cancel mid-turn kills the remote process group",
  ignore: !SSHD_PATH,
  async fn() {
    const sshd = await startSshd();
    const h = harness();
    try {
      const pidFile = join(tempDir(), "pids.json");
      const config = sshConfig(
        sshd,
        [
          "--stall-prompt",
          "--ignore-cancel",
          "--grandchild",
          "--pid-file",
          pidFile,
        ],
        { "cancel-grace": "0.5" },
      );
      const { run } = await h.manager.start({ input: { text: "hi" }, config });
      const log = new EventLog(run);
      await log.waitFor((e) => e.type === "message.delta");
      run.handle.cancel();
      await run.done;
      assert.equal(log.events.at(-1)?.data.code, "run.cancelled");
      assertAgentGone(pidFile);
    } finally {
      await h.close();
      await sshd.close();
    }
  },
});

Deno.test({
  name:
    "remote-ssh: an unreachable target fails with the ssh error in the stderr tail",
  ignore: !SSHD_PATH,
  async fn() {
    const h = harness();
    try {
      const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
      const port = (listener.addr as Deno.NetAddr).port;
      listener.close();
      const config = parseRunConfig({
        provider: "custom",
        location: "remote-ssh",
        "acp-command": "agent --acp",
        workspace: "/tmp/x",
        "ssh-target": "nobody@127.0.0.1",
        "ssh-port": port,
        "ssh-connect-timeout": 2,
      });
      const { run } = await h.manager.start({ input: { text: "hi" }, config });
      const log = new EventLog(run);
      await run.done;
      const failed = log.events.at(-1)!;
      assert.equal(failed.type, "run.failed");
      assert.equal(failed.data.code, "acp.process_exited");
      assert.match(
        String(failed.data.stderr_tail),
        /Connection refused|connect to host/,
      );
    } finally {
      await h.close();
    }
  },
});

Deno.test({
  name:
    "remote-ssh: LangBot assets reach the remote agent through an ssh -R tunnel",
  ignore: !SSHD_PATH,
  async fn() {
    const sshd = await startSshd();
    const h = harness();
    try {
      const record = join(tempDir(), "record.jsonl");
      const config = sshConfig(sshd, [
        "--text",
        "ok",
        "--mcp-http",
        "--mcp-call",
        "--mcp-tool",
        "langbot_get_current_event",
        "--record",
        record,
      ]);
      const { run } = await h.manager.start({
        input: { text: "event over ssh" },
        config,
      });
      const log = new EventLog(run);
      const result = await run.done;
      assert.equal(
        result.status,
        "completed",
        JSON.stringify(log.events.at(-1)),
      );
      const lines = readRecord(record);
      const session = lines.find((line) => line.method === "session/new")!;
      const servers =
        (session.params as { mcpServers: Array<{ name: string; url: string }> })
          .mcpServers;
      const assets = servers.find((server) =>
        server.name === "langbot_assets"
      )!;
      assert.match(assets.url, /^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
      const call = lines.find((line) =>
        line.event === "mcp" && line.method === "tools/call"
      )!;
      assert.equal(call.status, 200);
      assert.ok(JSON.stringify(call.body).includes("event over ssh"));
    } finally {
      await h.close();
      await sshd.close();
    }
  },
});
