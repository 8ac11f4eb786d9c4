/**
 * The coding-relay-v1 hub over real WebSockets on 127.0.0.1: refusals,
 * fencing across restarts, cancel, offline, capacity and MCP through the
 * daemon-side proxy.
 */

import { assertRelayFrame } from "../contracts.ts";
import assert from "node:assert/strict";
import {
  createHub,
  type HubLogEntry,
  type RelayHub,
  serveHub,
} from "../../lib/hub/relay_hub.ts";
import type { RunEvent } from "../../lib/events.ts";
import { runDaemonClient } from "../../lib/daemon/client.ts";
import { startMcpProxy } from "../../lib/mcp_proxy.ts";
import {
  type JsonObject,
  markerFileName,
  MAX_FRAME_BYTES,
  MAX_JOBS,
  REFUSAL_REASONS,
} from "../../lib/relay.ts";
import { tempDir } from "../helpers.ts";

const TOKEN = "hub-test-token-5c1e9a7b3d";

class Daemon {
  readonly ws: WebSocket;
  readonly closed: Promise<{ code: number; reason: string }>;
  #queue: JsonObject[] = [];
  #waiters: ((frame: JsonObject) => void)[] = [];

  private constructor(ws: WebSocket) {
    this.ws = ws;
    ws.addEventListener("message", (event) => {
      const frame = assertRelayFrame(
        event.data as string,
        "hub->daemon",
      ) as JsonObject;
      const waiter = this.#waiters.shift();
      if (waiter) waiter(frame);
      else this.#queue.push(frame);
    });
    this.closed = new Promise((resolve) =>
      ws.addEventListener(
        "close",
        (event) => resolve({ code: event.code, reason: event.reason }),
      )
    );
  }

  static async open(url: string): Promise<Daemon> {
    const daemon = new Daemon(new WebSocket(url));
    await new Promise((resolve) =>
      daemon.ws.addEventListener("open", resolve, { once: true })
    );
    return daemon;
  }

  /** Opens a socket and completes the handshake as `daemonId`. */
  static async connect(url: string, daemonId = "laptop"): Promise<Daemon> {
    const daemon = await Daemon.open(url);
    daemon.send(hello(daemonId));
    assert.equal((await daemon.next()).type, "daemon.ready", "handshake");
    return daemon;
  }

  next(): Promise<JsonObject> {
    const queued = this.#queue.shift();
    if (queued) return Promise.resolve(queued);
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  send(frame: unknown): void {
    this.ws.send(typeof frame === "string" ? frame : JSON.stringify(frame));
  }

  async close(): Promise<void> {
    if (this.ws.readyState === WebSocket.OPEN) this.ws.close(1000);
    await this.closed;
  }
}

function hello(daemonId: string, overrides: JsonObject = {}): JsonObject {
  return {
    type: "daemon.hello",
    daemon_id: daemonId,
    protocol: "coding-relay-v1",
    token: TOKEN,
    metadata: { pid: 1, cwd: "/home/u", platform: "posix" },
    ...overrides,
  };
}

async function withHub(
  test: (
    ctx: { hub: RelayHub; url: string; stateDir: string; logs: HubLogEntry[] },
  ) => Promise<void>,
  options: {
    cancelTimeoutMs?: number;
    helloTimeoutMs?: number;
    mcpHandler?: (job: unknown, payload: unknown) => Promise<unknown>;
  } = {},
): Promise<void> {
  const stateDir = tempDir();
  const logs: HubLogEntry[] = [];
  const hub = createHub({
    token: TOKEN,
    stateDir,
    onLog: (entry) => logs.push(entry),
    ...options,
  });
  const server = serveHub({ hub });
  try {
    await test({ hub, url: server.url, stateDir, logs });
  } finally {
    await hub.close();
    await server.close();
    await Deno.remove(stateDir, { recursive: true });
  }
}

function startJob(
  hub: RelayHub,
  options: { signal?: AbortSignal; connectTimeoutMs?: number } = {},
) {
  const events: RunEvent[] = [];
  const result = hub.runJob({
    daemonId: "laptop",
    runId: "run-1",
    payload: { prompt_text: "hi" },
    onEvent: (event) => events.push(event),
    signal: options.signal,
    connectTimeoutMs: options.connectTimeoutMs ?? 5000,
  });
  return { events, result };
}

Deno.test("bad hellos are refused with 1008 and the live connection stays untouched", async () => {
  await withHub(async ({ hub, url, logs }) => {
    const first = await Daemon.connect(url);
    const cases: [unknown, string][] = [
      [hello("laptop-2", { token: "wrong" }), REFUSAL_REASONS.invalidToken],
      [
        hello("laptop-2", { protocol: "coding-relay-v0" }),
        REFUSAL_REASONS.upgradeProtocol,
      ],
      [{ type: "daemon.ping" }, REFUSAL_REASONS.helloRequired],
      ["not json", REFUSAL_REASONS.helloRequired],
      [hello("laptop"), REFUSAL_REASONS.connectedOrFenced],
    ];
    for (const [frame, reason] of cases) {
      const other = await Daemon.open(url);
      other.send(frame);
      assert.deepEqual(
        await other.closed,
        { code: 1008, reason },
        `refusal ${reason}`,
      );
    }
    first.send({ type: "daemon.ping" });
    assert.deepEqual(
      await first.next(),
      { type: "daemon.pong" },
      "first connection still answers",
    );
    assert.deepEqual(hub.listDaemons().map((d) => [d.daemonId, d.connected]), [[
      "laptop",
      true,
    ]], "still listed");
    assert.ok(
      !JSON.stringify(logs).includes(TOKEN),
      "token reached the log",
    );
    await first.close();
  });
});

Deno.test("a socket that never says hello is refused after the hello timeout", async () => {
  await withHub(async ({ url }) => {
    const silent = await Daemon.open(url);
    assert.deepEqual(await silent.closed, {
      code: 1008,
      reason: REFUSAL_REASONS.helloRequired,
    }, "timeout refusal");
  }, { helloTimeoutMs: 20 });
});

Deno.test("a drop mid-job fails the run, fences the ID across hub restarts, and unfence lifts it", async () => {
  const stateDir = tempDir();
  try {
    const hub = createHub({ token: TOKEN, stateDir });
    const server = serveHub({ hub });
    const daemon = await Daemon.connect(server.url);
    const job = startJob(hub);
    const start = await daemon.next();
    assert.equal(start.type, "run.start", "run.start sent");
    const marker = `${stateDir}/${markerFileName("laptop")}`;
    assert.equal(
      Deno.readTextFileSync(marker),
      "laptop",
      "marker written before run.start",
    );
    daemon.send({
      type: "run.event",
      job_id: start.job_id,
      event: { type: "message.delta", data: { chunk: { content: "hi" } } },
    });
    await daemon.close();
    assert.equal((await job.result).outcome, "disconnected", "outcome");
    assert.deepEqual(
      job.events.map((e) => [e.run_id, e.type, e.data.code, e.data.retryable]),
      [
        ["run-1", "message.delta", undefined, undefined],
        ["run-1", "run.failed", "agent_runtime.daemon_disconnected", false],
      ],
      "events",
    );
    await assert.rejects(
      startJob(hub).result,
      { code: "agent_runtime.daemon_fenced" },
      "later run fenced",
    );
    const again = await Daemon.open(server.url);
    again.send(hello("laptop"));
    assert.deepEqual(await again.closed, {
      code: 1008,
      reason: REFUSAL_REASONS.connectedOrFenced,
    }, "reconnect refused");
    await hub.close();
    await server.close();

    const restarted = createHub({ token: TOKEN, stateDir });
    const server2 = serveHub({ hub: restarted });
    try {
      assert.deepEqual(
        restarted.listDaemons().map((d) => [d.daemonId, d.fenced, d.connected]),
        [["laptop", true, false]],
        "fence reloaded",
      );
      const refused = await Daemon.open(server2.url);
      refused.send(hello("laptop"));
      assert.equal((await refused.closed).code, 1008, "restarted hub refuses");
      assert.equal(await restarted.unfence("laptop"), true, "unfenced");
      assert.equal([...Deno.readDirSync(stateDir)].length, 0, "marker removed");
      const back = await Daemon.connect(server2.url);
      assert.deepEqual(
        restarted.listDaemons().map((d) => [d.daemonId, d.fenced, d.connected]),
        [["laptop", false, true]],
        "back online",
      );
      await back.close();
    } finally {
      await restarted.close();
      await server2.close();
    }
  } finally {
    await Deno.remove(stateDir, { recursive: true });
  }
});

Deno.test("cancel: acknowledged cancels clear the marker, unacknowledged ones fence", async () => {
  await withHub(async ({ hub, url, stateDir }) => {
    const daemon = await Daemon.connect(url);
    const controller = new AbortController();
    const job = startJob(hub, { signal: controller.signal });
    const start = await daemon.next();
    controller.abort();
    assert.deepEqual(await daemon.next(), {
      type: "run.cancel",
      job_id: start.job_id,
    }, "run.cancel sent");
    daemon.send({
      type: "run.event",
      job_id: start.job_id,
      event: {
        type: "run.failed",
        data: { code: "agent_runtime.daemon_cancelled" },
      },
    });
    daemon.send({ type: "run.finished", job_id: start.job_id });
    assert.equal((await job.result).outcome, "cancelled", "acknowledged");
    assert.deepEqual(job.events, [], "events after run.cancel are dropped");
    assert.equal([...Deno.readDirSync(stateDir)].length, 0, "marker removed");
    await daemon.close();
  });
  await withHub(async ({ hub, url, stateDir }) => {
    const daemon = await Daemon.connect(url);
    const silent = new AbortController();
    const stuck = startJob(hub, { signal: silent.signal });
    const second = await daemon.next();
    silent.abort();
    assert.equal((await daemon.next()).type, "run.cancel", "second run.cancel");
    assert.equal(
      (await stuck.result).outcome,
      "cancel_timeout",
      "no acknowledgement",
    );
    assert.deepEqual(hub.listDaemons().map((d) => d.fenced), [true], "fenced");
    assert.deepEqual([...Deno.readDirSync(stateDir)].map((e) => e.name), [
      markerFileName("laptop"),
    ], "marker kept");
    daemon.send({ type: "run.finished", job_id: second.job_id }); // too late: ignored
    await daemon.close();
  }, { cancelTimeoutMs: 30 });
});

Deno.test("runs wait for the daemon, and fail as offline when it never comes", async () => {
  await withHub(async ({ hub, url }) => {
    await assert.rejects(
      startJob(hub, { connectTimeoutMs: 20 }).result,
      { code: "agent_runtime.daemon_offline", retryable: true },
      "offline",
    );
    const waiting = startJob(hub);
    const daemon = await Daemon.connect(url);
    const start = await daemon.next();
    assert.deepEqual([start.type, (start.payload as JsonObject).run_id], [
      "run.start",
      "run-1",
    ], "started once online");
    daemon.send({
      type: "run.event",
      job_id: start.job_id,
      event: { type: "run.completed", data: { finish_reason: "stop" } },
    });
    daemon.send({ type: "run.finished", job_id: start.job_id });
    assert.equal((await waiting.result).outcome, "finished", "finished");
    assert.deepEqual(waiting.events.map((e) => [e.run_id, e.type]), [[
      "run-1",
      "run.completed",
    ]], "events get run_id");
    await daemon.close();
  });
});

Deno.test(`at most ${MAX_JOBS} jobs run at once`, async () => {
  await withHub(async ({ hub, url }) => {
    const daemon = await Daemon.connect(url);
    const controller = new AbortController();
    const jobs = Array.from(
      { length: MAX_JOBS },
      () => startJob(hub, { signal: controller.signal }),
    );
    const ids: unknown[] = [];
    for (let i = 0; i < MAX_JOBS; i++) ids.push((await daemon.next()).job_id);
    assert.equal(new Set(ids).size, MAX_JOBS, "distinct job ids");
    await assert.rejects(
      startJob(hub).result,
      { code: "agent_runtime.daemon_busy" },
      "busy",
    );
    controller.abort();
    for (let i = 0; i < MAX_JOBS; i++) {
      const cancel = await daemon.next();
      daemon.send({ type: "run.finished", job_id: cancel.job_id });
    }
    for (const job of jobs) {
      assert.equal((await job.result).outcome, "cancelled", "cancelled");
    }
    await daemon.close();
  });
});

Deno.test("MCP round trip: agent → proxy → daemon → hub handler and back", async () => {
  const tools = (_job: unknown, payload: unknown) => {
    const message = payload as JsonObject;
    if (!("id" in message)) return Promise.resolve(null);
    return Promise.resolve({
      jsonrpc: "2.0",
      id: message.id,
      result: { echoed: message.method, text: "héllo ✓" },
    });
  };
  for (const handler of [tools, undefined]) {
    await withHub(async ({ hub, url }) => {
      const proxyReady = Promise.withResolvers<string>();
      const release = Promise.withResolvers<void>();
      const stop = new AbortController();
      const client = runDaemonClient({
        url,
        daemonId: "laptop",
        token: TOKEN,
        reconnectDelayMs: 20,
        signal: stop.signal,
        runJob: async (job) => {
          const proxy = startMcpProxy({ forward: job.mcp });
          proxyReady.resolve(proxy.url);
          await release.promise;
          await proxy.close();
          job.emit({ type: "run.completed", data: { finish_reason: "stop" } });
          return { cleanupConfirmed: true };
        },
      });
      const job = startJob(hub);
      const proxyUrl = await proxyReady.promise;
      const post = (body: unknown) =>
        fetch(proxyUrl, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(body),
        });
      const answer = await post({
        jsonrpc: "2.0",
        id: 7,
        method: "tools/list",
      });
      assert.equal(
        answer.headers.get("content-type"),
        "application/json; charset=utf-8",
        "content type",
      );
      assert.equal(
        await answer.text(),
        handler
          ? '{"jsonrpc": "2.0", "id": 7, "result": {"echoed": "tools/list", "text": "héllo ✓"}}'
          : '{"jsonrpc": "2.0", "id": 7, "error": {"code": -32000, "message": "no assets for this run"}}',
        "answer",
      );
      const note = await post({
        jsonrpc: "2.0",
        method: "notifications/initialized",
      });
      assert.deepEqual(
        [note.status, await note.text()],
        [202, ""],
        "notification",
      );
      release.resolve();
      assert.equal((await job.result).outcome, "finished", "job finished");
      stop.abort();
      await client;
    }, { mcpHandler: handler });
  }
});

Deno.test("a daemon frame over 1 MiB closes the socket with 1009 and fences its job", async () => {
  await withHub(async ({ hub, url }) => {
    const daemon = await Daemon.connect(url);
    const job = startJob(hub);
    const start = await daemon.next();
    daemon.send({
      type: "run.event",
      job_id: start.job_id,
      event: {
        type: "message.delta",
        data: { chunk: { content: "x".repeat(MAX_FRAME_BYTES) } },
      },
    });
    assert.deepEqual(await daemon.closed, {
      code: 1009,
      reason: REFUSAL_REASONS.frameTooLarge,
    }, "close");
    assert.equal((await job.result).outcome, "disconnected", "outcome");
    assert.deepEqual(hub.listDaemons().map((d) => d.fenced), [true], "fenced");
  });
});

/** A bare-bones WebSocket client on a raw TCP connection, so the test can drop it without a close frame. */
class RawTcpDaemon {
  #buffer = new Uint8Array(0);
  private constructor(readonly conn: Deno.TcpConn) {}

  static async connect(url: string): Promise<RawTcpDaemon> {
    const port = Number(new URL(url).port);
    const daemon = new RawTcpDaemon(
      await Deno.connect({ hostname: "127.0.0.1", port }),
    );
    await daemon.#write(new TextEncoder().encode(
      `GET / HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
        `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`,
    ));
    while (!new TextDecoder().decode(daemon.#buffer).includes("\r\n\r\n")) {
      await daemon.#fill();
    }
    const head = new TextDecoder().decode(daemon.#buffer).indexOf("\r\n\r\n") +
      4;
    daemon.#buffer = daemon.#buffer.slice(head);
    return daemon;
  }

  async #write(bytes: Uint8Array): Promise<void> {
    let written = 0;
    while (written < bytes.length) {
      written += await this.conn.write(bytes.subarray(written));
    }
  }

  async #fill(): Promise<void> {
    const chunk = new Uint8Array(65536);
    const n = await this.conn.read(chunk);
    if (n === null) throw new Error("connection closed");
    const merged = new Uint8Array(this.#buffer.length + n);
    merged.set(this.#buffer);
    merged.set(chunk.subarray(0, n), this.#buffer.length);
    this.#buffer = merged;
  }

  /** Sends one masked text frame (payloads under 64 KiB). */
  send(frame: unknown): Promise<void> {
    const payload = new TextEncoder().encode(JSON.stringify(frame));
    const header = payload.length < 126
      ? [0x81, 0x80 | payload.length]
      : [0x81, 0x80 | 126, payload.length >> 8, payload.length & 0xff];
    const mask = [1, 2, 3, 4];
    return this.#write(
      new Uint8Array([
        ...header,
        ...mask,
        ...payload.map((b, i) => b ^ mask[i % 4]),
      ]),
    );
  }

  /** Reads one unmasked server text frame (payloads under 64 KiB). */
  async next(): Promise<JsonObject> {
    while (this.#buffer.length < 2) await this.#fill();
    let length = this.#buffer[1] & 0x7f;
    let offset = 2;
    if (length === 126) {
      while (this.#buffer.length < 4) await this.#fill();
      length = (this.#buffer[2] << 8) | this.#buffer[3];
      offset = 4;
    }
    while (this.#buffer.length < offset + length) await this.#fill();
    const text = new TextDecoder().decode(
      this.#buffer.subarray(offset, offset + length),
    );
    this.#buffer = this.#buffer.slice(offset + length);
    return JSON.parse(text);
  }
}

Deno.test("a TCP drop without a close frame fails the job promptly and fences", async () => {
  await withHub(async ({ hub, url }) => {
    const daemon = await RawTcpDaemon.connect(url);
    await daemon.send(hello("laptop"));
    assert.equal((await daemon.next()).type, "daemon.ready", "ready");
    const job = startJob(hub);
    assert.equal((await daemon.next()).type, "run.start", "run.start");
    daemon.conn.close();
    assert.equal((await job.result).outcome, "disconnected", "outcome");
    assert.deepEqual(job.events.map((e) => e.data.code), [
      "agent_runtime.daemon_disconnected",
    ], "run.failed");
    assert.deepEqual(hub.listDaemons().map((d) => [d.connected, d.fenced]), [[
      false,
      true,
    ]], "fenced");
  });
});
