/**
 * The two ways a remote-ssh agent reaches its LangBot assets, over a real
 * sshd that refuses TCP forwarding (`AllowTcpForwarding no`): the default
 * `ssh -R` tunnel fails with `assets.tunnel_refused` naming the fix (after
 * the bounded retries a taken remote port gets; also shown here with forwarding
 * allowed but the port taken on every try), and
 * `mcp-bridge-transport=http` gives the agent its six tools at the public URL
 * (the tunnel with forwarding allowed is in locations/ssh_test.ts).
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { prepareAgentCommand } from "../../lib/providers.ts";
import { parseRunConfig } from "../../lib/config.ts";
import { RunnerError } from "../../lib/errors.ts";
import { FORWARD_ATTEMPTS, launchSsh } from "../../lib/locations/ssh.ts";
import {
  assertFailedWith,
  EventLog,
  harness,
  runToEnd,
} from "../engine_helpers.ts";
import { readRecord, tempDir } from "../helpers.ts";
import {
  freePort,
  recordedMcpServers,
  SSHD_PATH,
  sshFixtureConfig,
  sshRunTest,
  startSshd,
  type TestSshd,
} from "../ssh_helpers.ts";
import {
  ASSET_TOOL_NAMES,
  currentEventCallFlags,
  sampleSpec,
} from "../assets_test_helpers.ts";

type Line = Record<string, unknown>;

function remoteConfig(
  sshd: TestSshd,
  record: string,
  extra: Record<string, unknown> = {},
) {
  return sshFixtureConfig(
    sshd,
    ["--text", "ok", ...currentEventCallFlags(record)],
    extra,
  );
}

/** An `assets` request field whose grant makes all six tools usable. */
function fullGrant(): Record<string, unknown> {
  const spec = sampleSpec("ignored");
  return {
    grant: {
      history: spec.grant.history,
      knowledge_bases: spec.grant.knowledgeBases,
      tools: spec.grant.tools,
    },
    inline: (spec.source as { inline: unknown }).inline,
  };
}

sshRunTest(
  "remote-ssh, forwarding refused: the ssh -R tunnel fails with assets.tunnel_refused naming mcp-bridge-transport=http",
  async ({ sshd, h }) => {
    const record = join(tempDir(), "record.jsonl");
    const { log, result } = await runToEnd(h.manager, {
      input: { text: "tunnel" },
      config: remoteConfig(sshd, record),
    });
    assert.equal(result.status, "failed");
    const failed = assertFailedWith(log, "assets.tunnel_refused");
    assert.equal(failed.data.retryable, false);
    // Refused outright: every one of the bounded tries was refused.
    assert.equal(
      (failed.data.detail as { attempts: number }).attempts,
      FORWARD_ATTEMPTS,
    );
    assert.match(String(failed.data.error), /refused the reverse tunnel/);
    assert.match(
      String(failed.data.error),
      /Set mcp-bridge-transport=http with mcp-public-url/,
    );
    assert.equal(
      log.events.filter((e) => e.type === "run.failed").length,
      1,
    );
    // The remote wrapper got no env-json, so it never started the agent.
    assert.deepEqual(readRecord(record), []);
  },
  { allowTcpForwarding: false },
);

sshRunTest(
  "remote-ssh, forwarding refused: mcp-bridge-transport=http gives the agent its six tools at mcp-public-url, the token only in a header",
  async ({ sshd, h }) => {
    const record = join(tempDir(), "record.jsonl");
    const port = freePort();
    const publicUrl = `http://127.0.0.1:${port}/mcp`;
    const { log, result } = await runToEnd(h.manager, {
      input: { text: "event over http" },
      config: remoteConfig(sshd, record, {
        "mcp-bridge-transport": "http",
        "mcp-bridge-port": port,
        "mcp-public-url": publicUrl,
      }),
      assets: fullGrant(),
    });
    assert.equal(
      result.status,
      "completed",
      JSON.stringify(log.events.at(-1)),
    );
    const lines = readRecord(record);
    const assets = recordedMcpServers(record).find((server) =>
      server.name === "langbot_assets"
    )!;
    assert.equal(assets.url, publicUrl);
    assert.equal(assets.headers.length, 1);
    assert.equal(assets.headers[0].name, "Authorization");
    assert.match(assets.headers[0].value, /^Bearer \S{20,}$/);
    const mcp = (method: string) =>
      lines.find((line: Line) =>
        line.event === "mcp" && line.method === method
      )!;
    const tools = (mcp("tools/list").body as {
      result: { tools: Array<{ name: string }> };
    }).result.tools.map((tool) => tool.name);
    assert.deepEqual(tools.toSorted(), ASSET_TOOL_NAMES);
    assert.equal(mcp("tools/call").status, 200);
    assert.ok(
      JSON.stringify(mcp("tools/call").body).includes(
        "event over http",
      ),
    );
    // The run's token stopped working with the run.
    const after = await fetch(publicUrl, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        authorization: assets.headers[0].value,
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    });
    await after.body?.cancel();
    assert.equal(after.status, 401);
  },
  { allowTcpForwarding: false },
);

Deno.test({
  name:
    "remote-ssh: a cancel while ssh is still connecting stops ssh before the run ends",
  ignore: !SSHD_PATH,
  async fn() {
    // A port that accepts and never speaks SSH: ssh waits for the banner.
    const silent = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const h = harness();
    try {
      const config = parseRunConfig({
        provider: "custom",
        location: "remote-ssh",
        "acp-command": "agent --acp",
        workspace: "/tmp/never",
        "ssh-target": "nobody@127.0.0.1",
        "ssh-port": (silent.addr as Deno.NetAddr).port,
        "ssh-connect-timeout": 600,
      });
      const { run } = await h.manager.start({ input: { text: "hi" }, config });
      const log = new EventLog(run);
      const connection = await silent.accept();
      run.handle.cancel();
      await run.done;
      assert.equal(log.events.at(-1)?.data.code, "run.cancelled");
      // ssh's process group was ended and its reaper record dropped.
      assert.deepEqual([...Deno.readDirSync(join(h.dataDir, "agents"))], []);
      // Its end closed the connection (after ssh's own banner).
      const buffer = new Uint8Array(1024);
      while (await connection.read(buffer) !== null) { /* banner */ }
      connection.close();
    } finally {
      silent.close();
      await h.close();
    }
  },
});

Deno.test({
  name:
    "remote-ssh: a remote port taken on every try fails after the bounded launches with assets.tunnel_refused, the agent never started",
  ignore: !SSHD_PATH,
  async fn() {
    const sshd = await startSshd();
    const busy = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    try {
      const busyPort = (busy.addr as Deno.NetAddr).port;
      const record = join(tempDir(), "record.jsonl");
      const config = remoteConfig(sshd, record);
      let picks = 0;
      const outcome = await launchSsh({
        command: prepareAgentCommand(config),
        config,
        mcpServers: [{
          type: "http",
          name: "assets",
          url: `http://127.0.0.1:${freePort()}/mcp`,
          headers: [],
        }],
        remotePort: () => {
          picks++;
          return busyPort;
        },
      }).then(async (transport) => {
        await transport.teardown();
        return "launched";
      }, (error: unknown) => error);
      assert.ok(outcome instanceof RunnerError, String(outcome));
      assert.equal(outcome.code, "assets.tunnel_refused");
      assert.equal(picks, FORWARD_ATTEMPTS);
      assert.match(
        outcome.message,
        new RegExp(`${FORWARD_ATTEMPTS} times .*last ${busyPort}`),
      );
      assert.match(outcome.message, /mcp-bridge-transport=http/);
      assert.deepEqual(readRecord(record), []);
    } finally {
      busy.close();
      await sshd.close();
    }
  },
});
