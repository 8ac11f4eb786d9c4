/**
 * A slow LangBot tool through a real `runner daemon`: the Python hub answers
 * `mcp.request` inside its reader loop, so while a tool call runs it reads
 * no frame and answers no `daemon.ping`. A relay in front of our hub plays
 * that hub: during the tool call it holds every frame in both directions
 * until the daemon has pinged for several keep-alive timeouts (the 60 s call
 * of the issue, scaled down with `--ping-interval`/`--ping-timeout`).
 */

import { runnerLocations } from "../../lib/locations/runner_locations.ts";
import assert from "node:assert/strict";
import { join } from "node:path";
import { parseRunConfig } from "../../lib/config.ts";
import { createDaemonLocation } from "../../lib/locations/daemon.ts";
import { createHub, serveHub } from "../../lib/hub/relay_hub.ts";
import type { Json, JsonObject } from "../../lib/relay.ts";
import { createRunManager } from "../../lib/run/manager.ts";
import { openStore } from "../../lib/store/open.ts";
import { EventLog } from "../engine_helpers.ts";
import {
  daemonCliArgs,
  fixtureCommand,
  readRecord,
  spawnCli,
  tempDir,
} from "../helpers.ts";

const TOKEN = "slow-tool-token-Vq8Lm3Zx6Rt1Hb9Nc4Kw7Ys2";

/** Pings the daemon sends while the relay holds the tool call. */
const PINGS_DURING_CALL = 30;
/** The daemon's keep-alive: a ping every 50 ms, dead after 500 ms of silence. */
const KEEPALIVE_FLAGS = ["--ping-interval", "0.05", "--ping-timeout", "0.5"];

/**
 * A WebSocket relay between a daemon and a hub that, once the daemon sends a
 * `tools/call`, passes no frame either way until it holds
 * {@linkcode PINGS_DURING_CALL} pings; then it delivers the hub's answer
 * first and the held pings after it, as the Python hub's reader loop would.
 */
class SlowToolHub {
  readonly url: string;
  connections = 0;
  pingsHeld = 0;
  readonly #server: Deno.HttpServer<Deno.NetAddr>;
  readonly #sockets: WebSocket[] = [];

  constructor(hubUrl: string) {
    this.#server = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen() {} },
      (request) => {
        const { socket, response } = Deno.upgradeWebSocket(request);
        this.connections += 1;
        this.#relay(socket, new WebSocket(hubUrl));
        return response;
      },
    );
    this.url = `ws://127.0.0.1:${this.#server.addr.port}`;
  }

  #relay(daemon: WebSocket, hub: WebSocket): void {
    this.#sockets.push(daemon, hub);
    const hubOpen = new Promise((resolve) =>
      hub.addEventListener("open", resolve, { once: true })
    );
    let stalled = false;
    const toHub: string[] = [];
    const toDaemon: string[] = [];
    const release = () => {
      stalled = false;
      for (const text of toDaemon.splice(0)) daemon.send(text);
      for (const text of toHub.splice(0)) hub.send(text);
    };
    daemon.addEventListener("message", async (event) => {
      const text = String(event.data);
      await hubOpen;
      const frame = JSON.parse(text);
      if (stalled) {
        toHub.push(text);
        if (frame.type === "daemon.ping") this.pingsHeld += 1;
        if (this.pingsHeld >= PINGS_DURING_CALL) release();
        return;
      }
      hub.send(text);
      if (
        frame.type === "mcp.request" && frame.payload?.method === "tools/call"
      ) {
        stalled = true;
      }
    });
    hub.addEventListener("message", (event) => {
      if (stalled) toDaemon.push(String(event.data));
      else daemon.send(String(event.data));
    });
    const closeOther = (other: WebSocket) => (event: CloseEvent) => {
      if (other.readyState === WebSocket.OPEN) {
        other.close(event.code === 1005 ? 1000 : event.code, event.reason);
      }
    };
    daemon.addEventListener("close", closeOther(hub));
    hub.addEventListener("close", closeOther(daemon));
  }

  async close(): Promise<void> {
    for (const socket of this.#sockets) {
      if (socket.readyState === WebSocket.OPEN) socket.close(1000);
    }
    await this.#server.shutdown();
  }
}

/** Answers the fixture agent's MCP session; `tools/call` echoes its arguments. */
function slowToolHandler(_job: unknown, payload: Json): Promise<Json> {
  const message = payload as JsonObject;
  if (!("id" in message)) return Promise.resolve(null);
  const result: JsonObject = message.method === "initialize"
    ? {
      protocolVersion: "2025-06-18",
      capabilities: { tools: { listChanged: false } },
      serverInfo: { name: "slow-hub", version: "1" },
    }
    : message.method === "tools/list"
    ? { tools: [{ name: "slow_tool", inputSchema: { type: "object" } }] }
    : {
      content: [{ type: "text", text: "slow tool done" }],
      structuredContent: { echoed: (message.params as JsonObject).arguments },
    };
  return Promise.resolve({ jsonrpc: "2.0", id: message.id, result });
}

Deno.test("a tool call longer than several keep-alive timeouts completes against a hub that answers no ping meanwhile; no fence", async () => {
  const dataDir = tempDir();
  const store = await openStore({ dataDir });
  const hub = createHub({
    token: TOKEN,
    stateDir: join(dataDir, "relay"),
    mcpHandler: slowToolHandler,
  });
  const server = serveHub({ hub });
  const slowHub = new SlowToolHub(server.url);
  const manager = createRunManager({
    store,
    locations: runnerLocations(createDaemonLocation({ hub })),
  });
  const daemon = spawnCli(
    daemonCliArgs(
      slowHub.url,
      "slow-box",
      "--data-dir",
      tempDir(),
      "--reconnect-delay",
      "0.1",
      ...KEEPALIVE_FLAGS,
    ),
    { env: { RUNNER_DAEMON_TOKEN: TOKEN } },
  );
  const daemonLog = new Response(daemon.stderr).text();
  try {
    const record = join(tempDir(), "record.jsonl");
    const { run } = await manager.start({
      input: { text: "use the slow tool" },
      config: parseRunConfig({
        provider: "custom",
        "acp-command": fixtureCommand(
          "--mcp-call",
          "--mcp-tool",
          "slow_tool",
          "--record",
          record,
        ),
        location: "daemon",
        "daemon-id": "slow-box",
        workspace: tempDir(),
      }),
    });
    const log = new EventLog(run);
    const result = await run.done;
    assert.equal(result.status, "completed", JSON.stringify(log.events.at(-1)));
    assert.deepEqual(log.messages(), [
      "echo: use the slow tool (turn 1)\nmcp: 1 tools",
    ]);
    const call = readRecord(record).find((line) =>
      line.event === "mcp" && line.method === "tools/call"
    );
    assert.deepEqual(call?.status, 200);
    assert.deepEqual(
      (call?.body as { result: JsonObject }).result.structuredContent,
      { echoed: {} },
    );
    assert.equal(slowHub.pingsHeld, PINGS_DURING_CALL, "pings went unanswered");
    assert.deepEqual(
      hub.listDaemons().map((d) => [d.daemonId, d.connected, d.fenced]),
      [["slow-box", true, false]],
      "still connected, not fenced",
    );
    assert.equal(slowHub.connections, 1, "the daemon never reconnected");
  } finally {
    try {
      daemon.kill("SIGTERM");
    } catch { /* already gone */ }
    await daemon.status;
    await daemon.stdout.cancel();
    await daemonLog;
    await slowHub.close();
    await hub.close();
    await server.close();
    await store.close();
  }
});
