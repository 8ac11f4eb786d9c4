import assert from "node:assert/strict";
import { join } from "node:path";
import { prepareAgentCommand } from "../../lib/providers.ts";
import { parseRunConfig } from "../../lib/config.ts";
import type { AgentTransport } from "../../lib/run/engine.ts";
import { launchSsh } from "../../lib/locations/ssh.ts";
import { REMOTE_PGID_MARKER } from "../../lib/locations/remote_report.ts";
import {
  assertFailedWith,
  cancelAfterFirstDelta,
  EventLog,
  makeGate,
  runToEnd,
  stubbornAgentFlags,
} from "../engine_helpers.ts";
import {
  assertAgentGone,
  fixtureCommand,
  readRecord,
  tempDir,
} from "../helpers.ts";
import {
  freePort,
  recordedMcpServers,
  SSHD_PATH,
  sshFixtureConfig as sshConfig,
  sshRunTest,
  startSshd,
} from "../ssh_helpers.ts";
import { currentEventCallFlags } from "../assets_test_helpers.ts";

/** The command line of every process this user can see, NUL bytes as spaces. */
function commandLines(): string[] {
  const lines: string[] = [];
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    try {
      const raw = Deno.readTextFileSync(`/proc/${entry.name}/cmdline`);
      if (raw) lines.push(raw.replaceAll("\0", " "));
    } catch { /* gone, or not ours to read */ }
  }
  return lines;
}

sshRunTest(
  "remote-ssh: a run streams over a real sshd, env-json crosses on stdin (never a command line), the session survives, teardown kills the remote group",
  async ({ sshd, h }) => {
    const record = join(tempDir(), "record.jsonl");
    const pidFile = join(tempDir(), "pids.json");
    const gate = await makeGate();
    const flags = [
      "--resume",
      "--state-dir",
      tempDir(),
      "--record",
      record,
      "--grandchild",
      "--pid-file",
      pidFile,
      "--gate-fifo",
      gate.path,
    ];
    const secret = `remote-secret-${crypto.randomUUID()}`;
    const config = sshConfig(sshd, flags, {
      "env-json": { REMOTE_SECRET: secret },
    });
    const first = await h.manager.start({
      conversationId: "ssh",
      input: { text: "one" },
      config,
    });
    const log = new EventLog(first.run);
    // Mid-turn the local ssh client, the remote shell and the agent all
    // exist: none of their command lines may carry the env-json value.
    await log.waitFor((e) => e.type === "message.delta");
    const lines = commandLines();
    assert.ok(
      lines.some((line) =>
        line.includes(REMOTE_PGID_MARKER) && line.includes(config.workspace!)
      ),
      "this run's ssh command line (with the remote wrapper) is visible",
    );
    for (const form of [secret, btoa(`REMOTE_SECRET=${secret}`)]) {
      const carrier = lines.find((line) => line.includes(form));
      assert.equal(carrier, undefined, `env-json on a command line`);
    }
    await gate.release();
    const result = await first.run.done;
    assert.equal(
      result.status,
      "completed",
      JSON.stringify(log.events.at(-1)),
    );
    assert.deepEqual(log.messages(), ["echo: one (turn 1)"]);
    const start = readRecord(record).find((line) => line.event === "start")!;
    assert.equal((start.env as Record<string, string>).REMOTE_SECRET, secret);
    assertAgentGone(pidFile);
    assert.ok(!JSON.stringify(log.events).includes(secret));
    const second = await h.manager.start({
      conversationId: "ssh",
      input: { text: "two" },
      config,
    });
    const secondLog = new EventLog(second.run);
    await secondLog.waitFor((e) => e.type === "message.delta");
    await gate.release();
    await second.run.done;
    assert.deepEqual(secondLog.messages(), ["echo: two (turn 2)"]);
  },
);

sshRunTest(
  "remote-ssh: cancel mid-turn kills the remote process group",
  async ({ sshd, h }) => {
    const pidFile = join(tempDir(), "pids.json");
    const config = sshConfig(
      sshd,
      stubbornAgentFlags(pidFile),
      { "cancel-grace": "0.5" },
    );
    const { log } = await cancelAfterFirstDelta(h.manager, {
      input: { text: "hi" },
      config,
    });
    assert.equal(log.events.at(-1)?.data.code, "run.cancelled");
    assertAgentGone(pidFile);
  },
);

sshRunTest(
  "remote-ssh: a key the server refuses, or a closed port, fails with ssh's error in the stderr tail",
  async ({ sshd, h }) => {
    const stranger = join(tempDir(), "stranger_key");
    await new Deno.Command("ssh-keygen", {
      args: ["-q", "-t", "ed25519", "-N", "", "-f", stranger],
    }).output();
    const refusedKey = sshConfig(sshd, ["--text", "never"], {
      "ssh-identity-file": stranger,
      "ssh-connect-timeout": 5,
    });
    const closedPort = parseRunConfig({
      provider: "custom",
      location: "remote-ssh",
      "acp-command": "agent --acp",
      workspace: join(tempDir(), "never-made"),
      "ssh-target": sshd.target,
      "ssh-port": freePort(),
      "ssh-connect-timeout": 2,
    });
    const cases: Array<[typeof closedPort, RegExp]> = [
      [refusedKey, /Permission denied/],
      [closedPort, /Connection refused|connect to host/],
    ];
    for (const [config, expected] of cases) {
      const { log } = await runToEnd(h.manager, {
        input: { text: "hi" },
        config,
      });
      const failed = assertFailedWith(log, "acp.process_exited");
      assert.match(String(failed.data.stderr_tail), expected);
      assert.equal(log.ofType("message.delta").length, 0);
    }
  },
);

sshRunTest(
  "remote-ssh: LangBot assets reach the remote agent through an ssh -R tunnel",
  async ({ sshd, h }) => {
    const record = join(tempDir(), "record.jsonl");
    const config = sshConfig(sshd, [
      "--text",
      "ok",
      ...currentEventCallFlags(record),
    ]);
    const { log, result } = await runToEnd(h.manager, {
      input: { text: "event over ssh" },
      config,
    });
    assert.equal(
      result.status,
      "completed",
      JSON.stringify(log.events.at(-1)),
    );
    const assets = recordedMcpServers(record).find((server) =>
      server.name === "langbot_assets"
    )!;
    assert.match(assets.url, /^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
    const call = readRecord(record).find((line) =>
      line.event === "mcp" && line.method === "tools/call"
    )!;
    assert.equal(call.status, 200);
    assert.ok(JSON.stringify(call.body).includes("event over ssh"));
  },
);

Deno.test({
  name:
    "remote-ssh: an ssh -R port already taken on the remote is retried with another port",
  ignore: !SSHD_PATH,
  async fn() {
    const sshd = await startSshd();
    const busy = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const mcp = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen() {} },
      () => new Response("through the tunnel"),
    );
    let transport: AgentTransport | undefined;
    try {
      const busyPort = (busy.addr as Deno.NetAddr).port;
      const picks = [busyPort, freePort()];
      const free = picks[1];
      const config = sshConfig(sshd, ["--text", "unused"]);
      transport = await launchSsh({
        command: prepareAgentCommand(config),
        config,
        mcpServers: [{
          type: "http",
          name: "assets",
          url: `http://127.0.0.1:${mcp.addr.port}/mcp`,
          headers: [],
        }],
        remotePort: () => picks.shift() ?? freePort(),
      });
      assert.equal(picks.length, 0, "the taken port was tried first");
      const [server] = transport.mcpServers as Array<{ url: string }>;
      assert.equal(new URL(server.url).port, String(free));
      const answer = await fetch(server.url);
      assert.equal(await answer.text(), "through the tunnel");
    } finally {
      await transport?.teardown();
      busy.close();
      await mcp.shutdown();
      await sshd.close();
    }
  },
});

sshRunTest(
  "remote-ssh: a remote that never reports in cannot hold a launch with tunnels; the start-up timeout ends it and its ssh",
  async ({ sshd, h }) => {
    const config = sshConfig(sshd, ["--mcp-http"], { "startup-timeout": 1 });
    const { log, result } = await runToEnd(h.manager, {
      input: { text: "hi" },
      config,
    });
    assert.equal(result.code, "acp.start_timeout");
    assert.equal(log.ofType("run.failed").length, 1);
    assert.deepEqual(
      [...Deno.readDirSync(join(h.dataDir, "agents"))],
      [],
      "the ssh process of the launch is still recorded (alive)",
    );
  },
  // Every session just swallows its stdin: the wrapper never runs.
  { forceCommand: "cat >/dev/null" },
);

sshRunTest(
  "remote-ssh: create-session-if-missing=false on a new conversation fails with acp.session_missing, no session made",
  async ({ sshd, h }) => {
    const record = join(tempDir(), "record.jsonl");
    const config = sshConfig(sshd, ["--resume", "--record", record], {
      "create-session-if-missing": false,
    });
    const { log, result } = await runToEnd(h.manager, {
      conversationId: "ssh-new",
      input: { text: "one" },
      config,
    });
    assert.equal(result.status, "failed");
    assert.deepEqual(log.events.map((event) => event.type), [
      "run.started",
      "run.failed",
    ]);
    assert.equal(log.events[1].data.code, "acp.session_missing");
    const methods = readRecord(record).flatMap((line) =>
      line.method ? [line.method] : []
    );
    assert.deepEqual(methods, ["initialize"]);
  },
);

sshRunTest(
  "remote-ssh: a preset runs its own executable when the remote PATH has it, else its pinned npx fallback",
  async ({ sshd, h }) => {
    const bin = tempDir();
    const record = join(tempDir(), "record.jsonl");
    const script = (name: string, body: string) => {
      Deno.writeTextFileSync(join(bin, name), `#!/bin/sh\n${body}\n`);
      Deno.chmodSync(join(bin, name), 0o755);
    };
    script("npx", 'echo "npm error code ENOTCACHED: $*" >&2; exit 1');
    const base = {
      provider: "codex",
      "acp-command": undefined,
      "env-json": { PATH: `${bin}:${Deno.env.get("PATH")}` },
    };
    const fallback = await h.manager.start({
      input: { text: "hi" },
      config: sshConfig(sshd, [], base),
    });
    await fallback.run.done;
    const failed = (await h.store.getEvents(fallback.run.runId)).at(-1)!;
    assert.match(
      String(failed.data.stderr_tail),
      /ENOTCACHED: -y @zed-industries\/codex-acp@0\.16\.0/,
      JSON.stringify(failed),
    );
    script("codex-acp", `exec ${fixtureCommand("--record", record)} "$@"`);
    const { log, result } = await runToEnd(h.manager, {
      input: { text: "hi" },
      config: sshConfig(sshd, [], base),
    });
    assert.equal(result.status, "completed", JSON.stringify(log.events));
    assert.deepEqual(log.messages(), ["echo: hi (turn 1)"]);
    assert.ok(readRecord(record).some((line) => line.event === "start"));
  },
);
