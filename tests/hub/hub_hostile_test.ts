/**
 * The daemon hub against hostile or broken peers on 127.0.0.1: a frame
 * header announcing 60 MiB is refused before its payload arrives, an upgrade
 * request that never finishes times out, at the cap the oldest unfinished
 * one is closed to make room and a socket past upgraded ones gets 503,
 * per-daemon tokens admit only their own ID, one ID cannot take every job
 * slot, and a daemon that never answers cannot hold a run past its timeout.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  createHub,
  type HubServer,
  type RelayHub,
  serveHub,
} from "../../lib/hub/relay_hub.ts";
import { REFUSAL_REASONS } from "../../lib/relay.ts";
import { tempDir } from "../helpers.ts";
import {
  clientFrame,
  closeAll,
  connectTo,
  openHalfSent,
  parseAnswer,
  readToEnd,
  upgraded,
  writeAll,
} from "../raw_tcp_helpers.ts";
import { apiFetch, spawnServe, startServe } from "../serve_test_helpers.ts";
import { keptDaemonToken } from "../daemon_test_helpers.ts";

const TOKEN = "hub-hostile-token-Xq3Vw8Lm2Rt6Yp1Zk9";
const LAPTOP_TOKEN = "laptop-own-token-Hn4Bc7Jd2Gs5Wf8Qe1";

async function withHub(
  test: (
    ctx: { hub: RelayHub; url: string; server: HubServer },
  ) => Promise<void>,
  options: {
    tokens?: Record<string, string>;
    token?: string;
    maxJobsPerDaemon?: number;
    limits?: Parameters<typeof serveHub>[0]["limits"];
  } = {},
): Promise<void> {
  const stateDir = tempDir();
  const hub = createHub({
    token: "token" in options ? options.token : TOKEN,
    tokens: options.tokens,
    maxJobsPerDaemon: options.maxJobsPerDaemon,
    stateDir,
  });
  const server = serveHub({ hub, limits: options.limits });
  try {
    await test({ hub, url: server.url, server });
  } finally {
    await hub.close();
    await server.close();
  }
}

/** A close frame's code and reason out of raw server bytes. */
function closeFrame(bytes: Uint8Array): { code: number; reason: string } {
  assert.equal(bytes[0], 0x88, "a close frame");
  const length = bytes[1] & 0x7f;
  return {
    code: (bytes[2] << 8) | bytes[3],
    reason: new TextDecoder().decode(bytes.subarray(4, 2 + length)),
  };
}

/** A daemon on a browser-API WebSocket that completes the handshake. */
async function helloDaemon(
  url: string,
  daemonId: string,
  token: string,
): Promise<{ ws: WebSocket; first: Promise<Record<string, unknown>> }> {
  const ws = new WebSocket(url);
  await new Promise((resolve, reject) => {
    ws.addEventListener("open", resolve, { once: true });
    ws.addEventListener(
      "close",
      () => reject(new Error("the hub closed the socket before it opened")),
      { once: true },
    );
  });
  const first = new Promise<Record<string, unknown>>((resolve) => {
    ws.addEventListener("message", (e) => resolve(JSON.parse(e.data)), {
      once: true,
    });
    ws.addEventListener(
      "close",
      (e) => resolve({ closed: e.code, reason: e.reason }),
      { once: true },
    );
  });
  ws.send(JSON.stringify({
    type: "daemon.hello",
    daemon_id: daemonId,
    protocol: "coding-relay-v1",
    token,
    metadata: {},
  }));
  return { ws, first };
}

Deno.test("a frame header announcing 60 MiB is refused with 1009 before any payload is sent", async () => {
  await withHub(async ({ url }) => {
    const conn = await upgraded(url);
    // FIN+text, masked, 64-bit length 60 MiB, mask key — and no payload at all.
    const header = new Uint8Array([
      0x81,
      0xff,
      0,
      0,
      0,
      0,
      0x03,
      0xc0,
      0,
      0,
      1,
      2,
      3,
      4,
    ]);
    await writeAll(conn, header);
    // The answer comes while the 60 MiB are still unsent (a 30 s bound keeps
    // a server that waits for them from hanging the test).
    const answer = new Uint8Array(256);
    const timer = setTimeout(() => conn.close(), 30_000);
    const read = await conn.read(answer);
    clearTimeout(timer);
    assert.deepEqual(closeFrame(answer.subarray(0, read!)), {
      code: 1009,
      reason: REFUSAL_REASONS.frameTooLarge,
    });
    conn.close();
  });
});

Deno.test("an upgrade request that never finishes gets 408", async () => {
  await withHub(async ({ url }) => {
    const slow = await connectTo(url);
    await writeAll(slow, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    assert.equal(parseAnswer(await readToEnd(slow)).status, 408);
  }, { limits: { headerTimeoutMs: 300 } });
});

Deno.test("at the cap the oldest unfinished upgrade request makes room for a daemon; past upgraded sockets a new one gets 503", async () => {
  await withHub(async ({ url }) => {
    // Two upgraded sockets and one that never finishes its request fill the cap.
    const stalled = await connectTo(url);
    await writeAll(stalled, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    const held = await Promise.all([upgraded(url), upgraded(url)]);
    // A real daemon still gets in: the unfinished request is closed for it.
    const third = await upgraded(url);
    assert.match(
      new TextDecoder().decode(await readToEnd(stalled)),
      /^HTTP\/1.1 503 /,
    );
    // Every socket is upgraded now: none may be closed, so a new one is refused.
    const extra = await connectTo(url);
    assert.match(
      new TextDecoder().decode(await readToEnd(extra)),
      /^HTTP\/1.1 503 /,
    );
    [...held, third].forEach((conn) => conn.close());
  }, { limits: { maxConnections: 3 } });
});

Deno.test("a burst of unfinished upgrade requests past the cap cannot keep a daemon out", async () => {
  await withHub(async ({ url, server }) => {
    const slow = await openHalfSent(
      url,
      60,
      "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n",
    );
    try {
      // Each socket past the cap closed the oldest unfinished one to get in.
      const daemon = await helloDaemon(url, "laptop", TOKEN);
      assert.equal((await daemon.first).type, "daemon.ready");
      const { evicted, refused, open, acceptErrors } = server.stats();
      assert.ok(evicted >= 60 - 16, `evicted ${evicted}`);
      assert.equal(refused, 0);
      assert.equal(acceptErrors, 0);
      assert.ok(open <= 16, `open ${open}`);
      daemon.ws.close();
    } finally {
      closeAll(slow);
    }
    // After the burst a daemon connects as ever.
    const later = await helloDaemon(url, "desktop", TOKEN);
    assert.equal((await later.first).type, "daemon.ready");
    later.ws.close();
  }, { limits: { maxConnections: 16 } });
});

Deno.test("per-daemon tokens admit only their own daemon ID; the shared token the others", async () => {
  await withHub(async ({ url }) => {
    const stolen = await helloDaemon(url, "laptop", TOKEN);
    assert.deepEqual(await stolen.first, {
      closed: 1008,
      reason: REFUSAL_REASONS.invalidToken,
    });
    const own = await helloDaemon(url, "laptop", LAPTOP_TOKEN);
    assert.equal((await own.first).type, "daemon.ready");
    const other = await helloDaemon(url, "desktop", TOKEN);
    assert.equal((await other.first).type, "daemon.ready");
    own.ws.close();
    other.ws.close();
  }, { tokens: { laptop: LAPTOP_TOKEN } });

  await withHub(async ({ url }) => {
    const unlisted = await helloDaemon(url, "desktop", LAPTOP_TOKEN);
    assert.deepEqual(await unlisted.first, {
      closed: 1008,
      reason: REFUSAL_REASONS.invalidToken,
    });
  }, { token: undefined, tokens: { laptop: LAPTOP_TOKEN } });
});

Deno.test("near-miss daemon tokens are refused: empty, cut, extended, re-cased, or another ID's", async () => {
  await withHub(async ({ url }) => {
    for (
      const [daemonId, token] of [
        ["desktop", ""],
        ["desktop", TOKEN.slice(0, -1)],
        ["desktop", `${TOKEN}x`],
        ["desktop", ` ${TOKEN}`],
        ["desktop", TOKEN.toUpperCase()],
        ["desktop", LAPTOP_TOKEN], // a per-daemon token is not the shared one
        [" laptop", TOKEN], // the same ID, padded: still needs its own token
        ["laptop", `${LAPTOP_TOKEN} `],
        ["laptop", LAPTOP_TOKEN.toLowerCase()],
      ]
    ) {
      const refused = await helloDaemon(url, daemonId, token);
      assert.deepEqual(await refused.first, {
        closed: 1008,
        reason: REFUSAL_REASONS.invalidToken,
      }, `${JSON.stringify(daemonId)} with ${JSON.stringify(token)}`);
    }
    const own = await helloDaemon(url, " laptop ", LAPTOP_TOKEN);
    assert.equal((await own.first).type, "daemon.ready");
    own.ws.close();
  }, { tokens: { laptop: LAPTOP_TOKEN } });
});

Deno.test("one daemon ID runs at most --daemon-max-jobs-per-id jobs at once", async () => {
  await withHub(async ({ hub, url }) => {
    const daemon = await helloDaemon(url, "laptop", TOKEN);
    assert.equal((await daemon.first).type, "daemon.ready");
    const stop = new AbortController();
    const first = hub.runJob({
      daemonId: "laptop",
      runId: "run-1",
      payload: { prompt_text: "hi" },
      onEvent: () => {},
      signal: stop.signal,
      connectTimeoutMs: 1000,
    });
    await assert.rejects(
      hub.runJob({
        daemonId: "laptop",
        runId: "run-2",
        payload: { prompt_text: "hi" },
        onEvent: () => {},
        connectTimeoutMs: 1000,
      }),
      (error: Error & { code?: string }) => {
        assert.equal(error.code, "agent_runtime.daemon_busy");
        assert.match(error.message, /--daemon-max-jobs-per-id/);
        return true;
      },
    );
    daemon.ws.close();
    stop.abort();
    await first.catch(() => {});
  }, { maxJobsPerDaemon: 1 });
});

Deno.test("a connected daemon that never answers cannot hold a run past its timeout", async () => {
  const dataDir = tempDir();
  const serve = await startServe({
    dataDir,
    args: ["--daemon-enabled", "--daemon-port", "0"],
  });
  try {
    const hub = await serve.waitForLog((e) => e.msg === "daemon hub listening");
    // The token runner serve keeps, as runner token --show --daemon prints it.
    const silent = await helloDaemon(
      String(hub.url),
      "silent",
      await keptDaemonToken(dataDir),
    );
    assert.equal((await silent.first).type, "daemon.ready");
    const response = await apiFetch(`${serve.url}/v1/runs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        input: { text: "hi" },
        config: {
          provider: "codex",
          location: "daemon",
          "daemon-id": "silent",
          timeout: 2,
          "cancel-grace": 1,
        },
        stream: false,
      }),
      // A bound so a hub that waits forever fails the test instead of hanging it.
      signal: AbortSignal.timeout(30_000),
    });
    const run = await response.json();
    assert.equal(run.status, "failed");
    assert.equal(run.code, "run.timeout");
    assert.deepEqual(
      run.events.filter((e: { type: string }) =>
        e.type === "run.completed" || e.type === "run.failed"
      ).length,
      1,
    );
    silent.ws.close();
  } finally {
    await serve.stop();
  }
});

Deno.test("runner serve's hub keeps at most --daemon-max-connected daemons and refuses the next one", async () => {
  const serve = await startServe({
    dataDir: tempDir(),
    args: [
      "--daemon-enabled",
      "--daemon-port",
      "0",
      "--daemon-token",
      TOKEN,
      "--daemon-max-connected",
      "2",
    ],
  });
  try {
    const listening = await serve.waitForLog((entry) =>
      entry.msg === "daemon hub listening"
    );
    const url = String(listening.url);
    const kept = [
      await helloDaemon(url, "one", TOKEN),
      await helloDaemon(url, "two", TOKEN),
    ];
    for (const daemon of kept) {
      assert.equal((await daemon.first).type, "daemon.ready");
    }
    const third = await helloDaemon(url, "three", TOKEN);
    assert.deepEqual(await third.first, {
      closed: 1008,
      reason: REFUSAL_REASONS.connectedOrFenced,
    });
    for (const daemon of kept) daemon.ws.close();
  } finally {
    await serve.stop();
  }
});

Deno.test("--daemon-max-connected outside 1-10000 is refused before serve starts", async () => {
  for (const value of ["0", "10001", "2.5"]) {
    const serve = spawnServe({
      dataDir: tempDir(),
      args: ["--daemon-enabled", "--daemon-max-connected", value],
    });
    const { code, stderr } = await serve.output();
    assert.equal(code, 2, value);
    assert.match(
      new TextDecoder().decode(stderr),
      /config\.invalid.*daemon-max-connected: must be a whole number from 1 to 10000/,
    );
  }
});

Deno.test("a hello sent as three fragments, dribbled a byte per write, is read whole", async () => {
  await withHub(async ({ url }) => {
    const conn = await upgraded(url);
    const hello = new TextEncoder().encode(JSON.stringify({
      type: "daemon.hello",
      daemon_id: "dribbler",
      protocol: "coding-relay-v1",
      token: TOKEN,
      metadata: { padding: "x".repeat(300) },
    }));
    const third = Math.floor(hello.length / 3);
    const frames = [
      clientFrame(0x01, hello.subarray(0, third)), // text, not final
      clientFrame(0x00, hello.subarray(third, 2 * third)), // continuation
      clientFrame(0x80, hello.subarray(2 * third)), // final continuation
    ];
    for (const frame of frames) {
      for (const byte of frame) await writeAll(conn, new Uint8Array([byte]));
    }
    const answer = new Uint8Array(4096);
    const read = await conn.read(answer);
    const bytes = answer.subarray(0, read!);
    assert.equal(bytes[0], 0x81, "a text frame");
    const text = new TextDecoder().decode(
      bytes.subarray(2 + (bytes[1] === 126 ? 2 : 0)),
    );
    assert.equal(JSON.parse(text).type, "daemon.ready");
    conn.close();
  });
});
