/**
 * Attacks on a confined agent's network (`docs/sandbox.md`, "Network"): with
 * the default `sandbox-network=full` the attacker fixture
 * (`tests/fixtures/attack_network.ts`) dials the host's loopback services
 * (every spelling of loopback), every address of the host (its IPv6
 * link-local one included), the DNS forwarder's address, another run's
 * assets endpoint and the runner's own API, and reaches none of them, while
 * its run's assets endpoint still answers. `host` (the operator's
 * explicit choice) shows what the same attacker reaches without the guard. A
 * caller (over HTTP) or a hub (to a daemon) cannot widen the network.
 */

import { tmpdir } from "node:os";
import assert from "node:assert/strict";
import { ROOT, tempDir } from "../helpers.ts";
import { sampleAssets, sampleSpec } from "../assets_test_helpers.ts";
import { startEphemeralBridge } from "../../lib/assets/bridge.ts";
import { harness, runCompleted } from "../engine_helpers.ts";
import {
  type NetworkAttack,
  networkAttackFlag,
} from "../fixtures/attack_network.ts";
import { mapRunStart } from "../../lib/relay/payload.ts";
import {
  SANDBOX_DNS_ADDRESS,
  type SandboxNetwork,
} from "../../lib/agent/sandbox_network.ts";
import {
  DENO_DIR,
  reachLines,
  sandboxConfig,
  sandboxKeys,
  sandboxWorld,
} from "../sandbox_helpers.ts";
import {
  deltaText,
  postJson,
  sseEvents,
  startServe,
} from "../serve_test_helpers.ts";

/** A listener that counts the connections it accepted (what an attacker reached). */
function countingListener(hostname: string): {
  port: number;
  accepted(): number;
  close(): void;
} {
  const listener = Deno.listen({ hostname, port: 0 });
  let accepted = 0;
  (async () => {
    for await (const conn of listener) {
      accepted++;
      conn.close();
    }
  })().catch(() => {});
  return {
    port: (listener.addr as Deno.NetAddr).port,
    accepted: () => accepted,
    close: () => listener.close(),
  };
}

/** The host's first non-loopback IPv4 address (its own; nothing leaves the machine). */
function hostAddress(): string | undefined {
  return Deno.networkInterfaces().find((entry) =>
    entry.family === "IPv4" && !entry.address.startsWith("127.")
  )?.address;
}

/** The reply lines of the attacker, by their `attack-… target` head. */
function attackLines(text: string): Record<string, string> {
  const lines: Record<string, string> = {};
  for (const line of text.split("\n")) {
    const match = /^(attack-[a-z]+ .+?): (.*)$/.exec(line);
    if (match) lines[match[1]] = match[2];
  }
  return lines;
}

/** Runs the attacker confined (network as `extra` says) and returns its reply. */
async function attackFromSandbox(
  targets: { host: string; port: number }[] | NetworkAttack,
  extra: Record<string, unknown> = {},
): Promise<string> {
  const world = sandboxWorld();
  const h = harness({ environment: world.environment });
  try {
    const config = sandboxConfig(world, [
      ...networkAttackFlag(
        Array.isArray(targets) ? { connect: targets } : targets,
      ),
      "--mcp-http",
      "--mcp-call",
    ], extra);
    const log = await runCompleted(h.manager, {
      input: { text: "attack" },
      config,
      assets: sampleAssets(),
    });
    return log.messages().at(-1)!;
  } finally {
    await h.close();
  }
}

Deno.test("network attack: under the default sandbox-network a confined agent reaches neither the host's loopback nor the host's own address, and still reaches its assets endpoint", async () => {
  const loopback = countingListener("127.0.0.1");
  const anyAddress = countingListener("0.0.0.0");
  const address = hostAddress();
  try {
    const targets = [
      { host: "127.0.0.1", port: loopback.port },
      { host: "127.0.0.1", port: anyAddress.port },
      ...(address ? [{ host: address, port: anyAddress.port }] : []),
    ];
    const reply = await attackFromSandbox(targets);
    assert.match(reply, /\nmcp: \d+ tools/, "the assets endpoint answered");
    const lines = attackLines(reply);
    for (const { host, port } of targets) {
      assert.match(lines[`attack-connect ${host}:${port}`], /^error /);
    }
    assert.equal(loopback.accepted() + anyAddress.accepted(), 0);
  } finally {
    loopback.close();
    anyAddress.close();
  }
});

/** Every address of the host but loopback, as a connect target (link-local ones with their interface). */
function hostAddresses(): { address: string; family: "IPv4" | "IPv6" }[] {
  return Deno.networkInterfaces()
    .filter((entry) =>
      !entry.address.startsWith("127.") && entry.address !== "::1"
    )
    .map((entry) => ({
      family: entry.family,
      address: entry.family === "IPv6" && entry.address.startsWith("fe80:")
        ? `${entry.address}%${entry.name}`
        : entry.address,
    }));
}

Deno.test("network attack: a confined agent reaches no address of the host (IPv6 link-local included), no spelling of loopback, not the DNS forwarder's other ports, nor another run's assets endpoint", async () => {
  // Services bound to every address: what an address of the host reaches.
  const any4 = countingListener("0.0.0.0");
  const any6 = countingListener("::");
  const loopback6 = countingListener("::1");
  // Another run's assets endpoint, with its token: the attacker knows both.
  const other = await startEphemeralBridge(sampleSpec("other-run"));
  const otherPort = Number(new URL(other.url).port);
  try {
    const connect = [
      ...hostAddresses().map(({ address, family }) => ({
        host: address,
        port: family === "IPv4" ? any4.port : any6.port,
      })),
      { host: "0.0.0.0", port: any4.port },
      { host: "127.0.0.2", port: any4.port },
      { host: "::ffff:127.0.0.1", port: any4.port },
      { host: "::", port: any6.port },
      { host: "::1", port: loopback6.port },
      { host: "localhost", port: any4.port },
      { host: SANDBOX_DNS_ADDRESS, port: any4.port },
      { host: "127.0.0.1", port: otherPort },
      { host: "::1", port: otherPort },
    ];
    const http = [{
      url: other.url,
      method: "POST",
      headers: { authorization: `Bearer ${other.token}` },
      body: { jsonrpc: "2.0", id: 1, method: "tools/list" },
    }];
    const reply = await attackFromSandbox({ connect, http });
    assert.match(reply, /\nmcp: \d+ tools/, "its own assets endpoint answered");
    const lines = attackLines(reply);
    for (const { host, port } of connect) {
      assert.match(
        lines[`attack-connect ${host}:${port}`] ?? "missing",
        /^error /,
        `${host}:${port}`,
      );
    }
    assert.match(lines[`attack-http POST ${other.url}`], /^error /);
    assert.deepEqual(
      [any4.accepted(), any6.accepted(), loopback6.accepted()],
      [0, 0, 0],
      reply,
    );
  } finally {
    any4.close();
    any6.close();
    loopback6.close();
    await other.close();
  }
});

Deno.test("network attack: sandbox-network=host, the operator's explicit choice, is the host's network (the same attacker reaches loopback)", async () => {
  const loopback = countingListener("127.0.0.1");
  try {
    const reply = await attackFromSandbox(
      [{ host: "127.0.0.1", port: loopback.port }],
      { "sandbox-network": "host" },
    );
    assert.equal(
      attackLines(reply)[`attack-connect 127.0.0.1:${loopback.port}`],
      "ok",
    );
    assert.equal(loopback.accepted(), 1);
  } finally {
    loopback.close();
  }
});

Deno.test("network attack: through runner serve, a confined agent cannot call the runner's own API (start a run, list runs), and a caller cannot ask for the host's network", async () => {
  const world = sandboxWorld();
  const serve = await startServe({
    dataDir: tempDir(),
    args: [
      "--allow-custom-commands",
      ...["--sandbox", "confined"],
      ...["--sandbox-read-paths", `${ROOT},${DENO_DIR}`],
      // A confined operator names where callers' workspaces may be.
      ...["--workspace-roots", tmpdir()],
    ],
    env: world.environment,
  });
  try {
    const api = `${serve.url}/v1/runs`;
    const attack = {
      connect: [{ host: "127.0.0.1", port: Number(new URL(serve.url).port) }],
      http: [
        { url: api, method: "GET" },
        {
          url: api,
          method: "POST",
          body: { input: { text: "hi" }, config: { workspace: "/root" } },
        },
      ],
    };
    const keys = sandboxKeys(world, networkAttackFlag(attack));
    // What a caller names: the operator's confinement is not its to send.
    const callerConfig = {
      provider: keys.provider,
      "acp-command": keys["acp-command"],
      workspace: keys.workspace,
    };
    const response = await postJson(api, {
      input: { text: "attack" },
      config: callerConfig,
    });
    assert.equal(response.status, 200);
    const events = await sseEvents(response);
    const lines = attackLines(deltaText(events));
    assert.match(
      lines[`attack-connect 127.0.0.1:${new URL(serve.url).port}`],
      /^error /,
    );
    assert.match(lines[`attack-http GET ${api}`], /^error /);
    assert.match(lines[`attack-http POST ${api}`], /^error /);
    // A caller cannot widen the operator's network to the host's.
    const refused = await postJson(api, {
      input: { text: "hi" },
      config: { ...callerConfig, "sandbox-network": "host" },
    });
    assert.equal(refused.status, 403);
    assert.match(
      (await refused.json()).error.message,
      /^sandbox-network: the operator confines every run/,
    );
  } finally {
    await serve.stop();
  }
});

Deno.test("network attack: a hub's run.start cannot widen a daemon's network (host under full becomes full; none holds), and a narrower one is kept", () => {
  const mapped = (asked: string | undefined, own: SandboxNetwork) =>
    mapRunStart({
      prompt_text: "hi",
      config: {
        provider: "codex",
        cwd: "/srv/w",
        sandbox: "confined",
        ...(asked ? { sandbox_network: asked } : {}),
        langbot_assets_enabled: false,
      },
    }, {
      jobId: "j",
      fallbackCwd: "/srv",
      sandbox: {
        sandbox: "confined",
        sandboxNetwork: own,
        sandboxReadPaths: [],
        sandboxWritePaths: [],
      },
    }).config.sandboxNetwork;
  assert.equal(mapped("host", "full"), "full");
  assert.equal(mapped(undefined, "none"), "none");
  assert.equal(mapped("full", "none"), "none");
  assert.equal(mapped("none", "full"), "none");
  assert.equal(mapped("host", "host"), "host");
});

/**
 * A "remote" server in a network namespace this test makes (a veth pair to
 * the host, addresses in 10.213.0.0/16), so the agent's way out can be shown
 * without contacting any real outside address. Root only.
 */
async function remoteServer(): Promise<
  { address: string; port: number; close(): Promise<void> }
> {
  // The holder says "ready" from inside its new namespace.
  const holder = new Deno.Command("unshare", {
    args: ["--net", "--", "sh", "-c", "echo ready; exec sleep infinity"],
    stdin: "null",
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const holderOut = holder.stdout.pipeThrough(new TextDecoderStream())
    .getReader();
  await holderOut.read();
  const pid = holder.pid;
  const octet = 1 + (pid % 250);
  const [hostSide, inside] = [`rnh${pid}`, `rni${pid}`];
  const host = `10.213.${octet}.1`;
  const address = `10.213.${octet}.2`;
  const run = async (args: string[]) => {
    const out = await new Deno.Command(args[0], { args: args.slice(1) })
      .output();
    if (!out.success) {
      throw new Error(
        `${args.join(" ")}: ${new TextDecoder().decode(out.stderr)}`,
      );
    }
  };
  const inNs = (
    args: string[],
  ) => ["nsenter", "-t", String(pid), "-n", ...args];
  await run([
    "ip",
    "link",
    "add",
    hostSide,
    "type",
    "veth",
    "peer",
    "name",
    inside,
    "netns",
    String(pid),
  ]);
  await run(["ip", "addr", "add", `${host}/30`, "dev", hostSide]);
  await run(["ip", "link", "set", hostSide, "up"]);
  await run(inNs(["ip", "addr", "add", `${address}/30`, "dev", inside]));
  await run(inNs(["ip", "link", "set", inside, "up"]));
  await run(inNs(["ip", "link", "set", "lo", "up"]));
  const server = new Deno.Command("nsenter", {
    args: inNs([
      "python3",
      "-c",
      "import socket,sys\ns=socket.socket()\ns.bind(('0.0.0.0',0))\ns.listen()\nprint(s.getsockname()[1],flush=True)\nwhile True:\n  c,_=s.accept(); c.close()",
    ]).slice(1),
    stdin: "null",
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const reader = server.stdout.pipeThrough(new TextDecoderStream()).getReader();
  const first = await reader.read();
  const port = Number(first.value?.trim());
  return {
    address,
    port,
    async close() {
      server.kill("SIGKILL");
      await server.status;
      await reader.cancel().catch(() => {});
      await run(["ip", "link", "del", hostSide]).catch(() => {});
      holder.kill("SIGKILL");
      await holder.status;
      await holderOut.cancel().catch(() => {});
    },
  };
}

Deno.test({
  name:
    "network: under the default sandbox-network a confined agent reaches a server that is not on the host (a namespace the test made, standing in for its model API), but not the host's own address on that link",
  ignore: Deno.build.os !== "linux" || Deno.uid() !== 0,
  async fn() {
    const remote = await remoteServer();
    // The host's own side of that link: an address pasta does not copy in.
    const hostSide = remote.address.replace(/\.2$/, ".1");
    // Bound on that link only (the test made it), not on every address.
    const own = countingListener(hostSide);
    try {
      const target = { host: remote.address, port: remote.port };
      const ownTarget = { host: hostSide, port: own.port };
      const reply = await attackFromSandbox([target, ownTarget]);
      const lines = attackLines(reply);
      assert.equal(
        lines[`attack-connect ${remote.address}:${remote.port}`],
        "ok",
      );
      assert.match(lines[`attack-connect ${hostSide}:${own.port}`], /^error /);
      assert.equal(own.accepted(), 0, "the host's second address reached");
    } finally {
      own.close();
      await remote.close();
    }
  },
});

Deno.test("network: under sandbox-network=full the agent's resolver is pasta's DNS forwarder, not the host's", async () => {
  const world = sandboxWorld();
  const h = harness({ environment: world.environment });
  try {
    const config = sandboxConfig(world, ["--try-read", "/etc/resolv.conf"], {
      "langbot-assets-enabled": false,
    });
    const log = await runCompleted(h.manager, {
      input: { text: "hi" },
      config,
    });
    const seen = reachLines(log.messages()[0])["try-read /etc/resolv.conf"];
    assert.match(seen, new RegExp(`^ok nameserver ${SANDBOX_DNS_ADDRESS}\\b`));
    // The whole reply: the file's later lines follow the first.
    const reply = log.messages()[0];
    for (const line of Deno.readTextFileSync("/etc/resolv.conf").split("\n")) {
      if (/^\s*nameserver\s/.test(line)) assert.ok(!reply.includes(line));
    }
  } finally {
    await h.close();
  }
});
