/**
 * The hub's listener (`lib/hub/ws_listener.ts`) as a raw TCP client sees it:
 * a WebSocket upgrade is answered 101 with the RFC 6455 accept key and its
 * frames are read; anything but a WebSocket upgrade
 * gets 426; a head past 16 KiB is refused without waiting for the timeout; an
 * unfinished head gets 408; at the cap the oldest unfinished upgrade gets 503
 * to make room; and `close()` drops sockets not yet upgraded.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  listenForWebSockets,
  type WebSocketListener,
  type WebSocketListenerLimits,
} from "../../lib/hub/ws_listener.ts";
import type { ServerWebSocket } from "../../lib/hub/websocket.ts";
import {
  clientFrame,
  closeAll,
  connectTo,
  parseAnswer,
  readToEnd,
  writeAll,
} from "../raw_tcp_helpers.ts";

/** RFC 6455's sample key and the accept value it must get back. */
const SAMPLE_KEY = "dGhlIHNhbXBsZSBub25jZQ==";
const SAMPLE_ACCEPT = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";

const UPGRADE_LINES = [
  "GET / HTTP/1.1",
  "Host: 127.0.0.1",
  "Upgrade: websocket",
  "Connection: Upgrade",
  `Sec-WebSocket-Key: ${SAMPLE_KEY}`,
  "Sec-WebSocket-Version: 13",
];

/** A request head of `lines`. */
function head(lines: string[]): string {
  return lines.map((line) => `${line}\r\n`).join("") + "\r\n";
}

/** Listens with `limits` (defaults: generous), collecting upgraded sockets. */
async function withListener(
  test: (
    ctx: {
      listener: WebSocketListener;
      url: string;
      sockets: ServerWebSocket[];
      logs: Record<string, unknown>[];
    },
  ) => Promise<void>,
  limits: Partial<WebSocketListenerLimits> = {},
  onMessage?: (data: unknown) => void,
): Promise<void> {
  const sockets: ServerWebSocket[] = [];
  const logs: Record<string, unknown>[] = [];
  const listener = listenForWebSockets({
    hostname: "127.0.0.1",
    port: 0,
    log: (entry) => logs.push(entry),
    limits: {
      maxConnections: 16,
      headerTimeoutMs: 60_000,
      maxMessageBytes: 1024,
      idleTimeoutMs: 60_000,
      ...limits,
    },
    onSocket(socket) {
      sockets.push(socket);
      socket.addEventListener(
        "message",
        (event) => onMessage?.((event as MessageEvent).data),
      );
    },
  });
  try {
    await test({
      listener,
      url: `http://127.0.0.1:${listener.port}`,
      sockets,
      logs,
    });
  } finally {
    for (const socket of sockets) socket.close();
    await listener.close();
  }
}

/** A listener the test closes itself, collecting upgraded sockets. */
function bareListener(): {
  listener: WebSocketListener;
  sockets: ServerWebSocket[];
} {
  const sockets: ServerWebSocket[] = [];
  const listener = listenForWebSockets({
    hostname: "127.0.0.1",
    port: 0,
    limits: {
      maxConnections: 4,
      headerTimeoutMs: 60_000,
      maxMessageBytes: 1024,
      idleTimeoutMs: 60_000,
    },
    onSocket: (socket) => sockets.push(socket),
  });
  return { listener, sockets };
}

/** Sends `text` on a new connection and reads the answer to its end. */
async function answerTo(url: string, text: string) {
  const conn = await connectTo(url);
  await writeAll(conn, text);
  return parseAnswer(await readToEnd(conn));
}

/** Reads the first bytes the server sends. */
async function firstRead(conn: Deno.Conn): Promise<string> {
  const bytes = new Uint8Array(1024);
  const read = await conn.read(bytes);
  return new TextDecoder().decode(bytes.subarray(0, read ?? 0));
}

/** Opens connections that sent part of an upgrade head and wait. */
async function halfSent(url: string, count: number): Promise<Deno.TcpConn[]> {
  const conns: Deno.TcpConn[] = [];
  for (let i = 0; i < count; i++) {
    const conn = await connectTo(url);
    await writeAll(conn, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    conns.push(conn);
  }
  return conns;
}

Deno.test("a WebSocket upgrade gets 101 with the RFC 6455 accept key, and its frames reach the hub", async () => {
  const first = Promise.withResolvers<unknown>();
  await withListener(
    async ({ url, listener }) => {
      const conn = await connectTo(url);
      // Header names in any case, values with colons and padding.
      const lines = [
        "GET /relay HTTP/1.1",
        "HOST:127.0.0.1:1",
        "upgrade:  WebSocket ",
        "CONNECTION: keep-alive, Upgrade",
        `sec-websocket-key: ${SAMPLE_KEY}`,
        "Sec-WebSocket-Version:13",
      ];
      await writeAll(conn, head(lines));
      const answer = await firstRead(conn);
      assert.match(answer, /^HTTP\/1.1 101 /);
      assert.ok(
        answer.includes(`\r\nsec-websocket-accept: ${SAMPLE_ACCEPT}\r\n`),
        answer,
      );
      await writeAll(
        conn,
        clientFrame(0x81, new TextEncoder().encode("hello")),
      );
      assert.equal(await first.promise, "hello");
      assert.equal(listener.connections(), 1);
      conn.close();
    },
    {},
    first.resolve,
  );
});

Deno.test("anything but a WebSocket upgrade is answered 426 and closed", async () => {
  const without = (name: string) =>
    UPGRADE_LINES.filter((line) => !line.startsWith(name));
  const replaced = (name: string, line: string) => [...without(name), line];
  const refused: Record<string, string[]> = {
    "POST": ["POST / HTTP/1.1", ...UPGRADE_LINES.slice(1)],
    "no Upgrade": without("Upgrade:"),
    "Upgrade: h2c": replaced("Upgrade:", "Upgrade: h2c"),
    "no Connection": without("Connection:"),
    "Connection: keep-alive": replaced("Connection:", "Connection: keep-alive"),
    "Connection: noupgrade": replaced("Connection:", "Connection: noupgrade"),
    "no version": without("Sec-WebSocket-Version:"),
    "version 12": replaced(
      "Sec-WebSocket-Version:",
      "Sec-WebSocket-Version: 12",
    ),
    "no key": without("Sec-WebSocket-Key:"),
    "empty key": replaced("Sec-WebSocket-Key:", "Sec-WebSocket-Key:"),
  };
  await withListener(async ({ url, sockets }) => {
    for (const [name, lines] of Object.entries(refused)) {
      const answer = await answerTo(url, head(lines));
      assert.equal(answer.status, 426, name);
      assert.match(answer.body, /WebSocket upgrade required/, name);
    }
    // A client that closes before its head is complete gets the same word.
    const conn = await connectTo(url);
    await writeAll(conn, "GET / HTTP/1.1\r\n");
    await conn.closeWrite();
    assert.equal(parseAnswer(await readToEnd(conn)).status, 426);
    assert.equal(sockets.length, 0);
    // The full upgrade still works after them.
    const ok = await connectTo(url);
    await writeAll(ok, head(UPGRADE_LINES));
    assert.match(await firstRead(ok), /^HTTP\/1.1 101 /);
    ok.close();
  });
});

Deno.test("a head past 16 KiB is refused 426 at once, not held until the header timeout", async () => {
  await withListener(async ({ url }) => {
    const conn = await connectTo(url);
    // An endless header line: the server must stop reading past 16 KiB.
    await writeAll(conn, "GET / HTTP/1.1\r\nX-Pad: " + "a".repeat(17 * 1024));
    const answer = parseAnswer(await readToEnd(conn));
    assert.equal(answer.status, 426);
    // Just under the limit, with the rest, is a head still.
    const padded = [...UPGRADE_LINES, "X-Pad: " + "a".repeat(15 * 1024)];
    const ok = await connectTo(url);
    await writeAll(ok, head(padded));
    assert.match(await firstRead(ok), /^HTTP\/1.1 101 /);
    ok.close();
  });
});

Deno.test("a head not finished within the header timeout gets 408", async () => {
  await withListener(async ({ url }) => {
    const [slow] = await halfSent(url, 1);
    const answer = parseAnswer(await readToEnd(slow));
    assert.equal(answer.status, 408);
    assert.match(answer.body, /did not arrive in time/);
  }, { headerTimeoutMs: 200 });
});

Deno.test("at the cap the oldest unfinished upgrade gets 503 to make room; past upgraded sockets a new one gets 503", async () => {
  await withListener(async ({ url, listener, logs }) => {
    const [oldest, newer] = await halfSent(url, 2);
    const third = await connectTo(url);
    await writeAll(third, head(UPGRADE_LINES));
    assert.match(await firstRead(third), /^HTTP\/1.1 101 /);
    const evicted = parseAnswer(await readToEnd(oldest));
    assert.equal(evicted.status, 503);
    assert.match(evicted.body, /too many connections/);
    // `newer` finishes its head: upgraded too; now both places are busy.
    await writeAll(newer, head(UPGRADE_LINES.slice(2)));
    assert.match(await firstRead(newer), /^HTTP\/1.1 101 /);
    assert.equal(listener.connections(), 2);
    const refused = await answerTo(url, head(UPGRADE_LINES));
    assert.equal(refused.status, 503);
    assert.ok(listener.stats().refused >= 1);
    // The log names the hub's listener.
    const noted = logs.find((entry) =>
      entry.msg === "connections refused at the cap"
    );
    assert.equal(noted?.listener, "hub");
    closeAll([third, newer]);
  }, { maxConnections: 2 });
});

Deno.test("close() drops the sockets still sending their upgrade request", async () => {
  const { listener, sockets } = bareListener();
  const [pending] = await halfSent(`http://127.0.0.1:${listener.port}`, 1);
  // The server has the connection once it counts it.
  while (listener.connections() === 0) {
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  await listener.close();
  assert.equal((await readToEnd(pending)).length, 0, "closed without a word");
  assert.equal(sockets.length, 0);
});

Deno.test("frames cut right after the upgrade head are read whole, under the listener's message limit and idle timeout", async () => {
  const message = Promise.withResolvers<unknown>();
  await withListener(
    async ({ url }) => {
      const conn = await connectTo(url);
      // The head and the first two bytes of a frame in one write: the rest
      // follows once the upgrade is answered.
      const frame = clientFrame(0x81, new TextEncoder().encode("hello"));
      const bytes = new TextEncoder().encode(head(UPGRADE_LINES));
      const first = new Uint8Array(bytes.length + 2);
      first.set(bytes);
      first.set(frame.subarray(0, 2), bytes.length);
      await writeAll(conn, first);
      assert.match(await firstRead(conn), /^HTTP\/1.1 101 /);
      await writeAll(conn, frame.subarray(2));
      assert.equal(await message.promise, "hello");
      // Past `maxMessageBytes`: closed with 1009 and the listener's reason.
      await writeAll(conn, clientFrame(0x81, new Uint8Array(65)));
      const close = new Uint8Array(256);
      const read = await conn.read(close);
      assert.equal(close[0], 0x88, "a close frame");
      assert.equal((close[2] << 8) | close[3], 1009);
      assert.equal(
        new TextDecoder().decode(close.subarray(4, read!)),
        "too big for this hub",
      );
      conn.close();
    },
    { maxMessageBytes: 64, tooBigReason: "too big for this hub" },
    message.resolve,
  );
});

Deno.test("an upgraded socket that stays silent past the idle timeout is pinged, then closed", async () => {
  await withListener(async ({ url }) => {
    const conn = await connectTo(url);
    await writeAll(conn, head(UPGRADE_LINES));
    assert.match(await firstRead(conn), /^HTTP\/1.1 101 /);
    const rest = await readToEnd(conn);
    // A ping, and the connection ends (readToEnd fails if it stays open).
    assert.equal(rest[0], 0x89, "a ping first");
  }, { idleTimeoutMs: 100 });
});

Deno.test("an upgraded socket that closes frees its place under the cap", async () => {
  await withListener(async ({ url, listener }) => {
    for (let round = 0; round < 2; round++) {
      const conn = await connectTo(url);
      await writeAll(conn, head(UPGRADE_LINES));
      assert.match(await firstRead(conn), /^HTTP\/1.1 101 /, `round ${round}`);
      conn.close();
      // The server has no event for a peer gone; its count is what it holds.
      while (listener.connections() > 0) {
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    }
  }, { maxConnections: 1 });
});

/** Sends `text` and returns the status line's code of the first answer. */
async function statusOf(url: string, text: string): Promise<number> {
  const conn = await connectTo(url);
  try {
    await writeAll(conn, text);
    return Number(/^HTTP\/1.1 (\d{3}) /.exec(await firstRead(conn))?.[1]);
  } finally {
    conn.close();
  }
}

Deno.test("a head ends at its first empty line only: stray CRs and LFs inside it, lines without a colon and bytes after it are not read as its fields", async () => {
  const [request, ...fields] = UPGRADE_LINES;
  const upgradeWith = (...odd: string[]) => head([request, ...odd, ...fields]);
  await withListener(async ({ url }) => {
    const still: Record<string, string> = {
      "a line that starts with a CR": upgradeWith("\rX"),
      "a CR and a byte before a line's end": upgradeWith("X-A: a\rb"),
      "a line that ends with a bare LF": upgradeWith("X-A: a\n"),
      "a one-byte line cut by a bare LF": upgradeWith("Z\nX-B: b"),
      // After the real `Upgrade` field: a line without a colon is no field.
      "a line without a colon": head([...UPGRADE_LINES, "upgradeX"]),
      // The same write goes on past the head: those bytes are the socket's.
      "bytes after the head": head(UPGRADE_LINES) +
        "Sec-WebSocket-Version: 12\r\n",
    };
    for (const [name, text] of Object.entries(still)) {
      assert.equal(await statusOf(url, text), 101, name);
    }
  });
});

Deno.test("an empty head is refused at once; a head of exactly 16 KiB is still waited for", async () => {
  await withListener(async ({ url }) => {
    assert.equal(
      (await answerTo(url, "\r\n\r\n")).status,
      426,
      "not held until the header timeout (408)",
    );
    // 16 KiB without its end: under the limit, so the listener waits for
    // the rest, and the header timeout answers.
    const start = "GET / HTTP/1.1\r\nX-Pad: ";
    const exact = start + "a".repeat(16 * 1024 - start.length);
    assert.equal((await answerTo(url, exact)).status, 408);
  }, { headerTimeoutMs: 1000 });
});

Deno.test("a field name with whitespace before its colon names no field (RFC 9112)", async () => {
  await withListener(async ({ url, sockets }) => {
    for (
      const [name, line] of [
        ["Upgrade", "Upgrade : websocket"],
        ["Sec-WebSocket-Version", " Sec-WebSocket-Version: 13"],
      ]
    ) {
      const lines = [
        ...UPGRADE_LINES.filter((field) => !field.startsWith(name)),
        line,
      ];
      assert.equal((await answerTo(url, head(lines))).status, 426, line);
    }
    assert.equal(sockets.length, 0);
  });
});

Deno.test("close() leaves upgraded sockets to their owner: the hub can still talk on them and close them itself", async () => {
  const { listener, sockets } = bareListener();
  const conn = await connectTo(`http://127.0.0.1:${listener.port}`);
  await writeAll(conn, head(UPGRADE_LINES));
  assert.match(await firstRead(conn), /^HTTP\/1.1 101 /);
  await listener.close();
  sockets[0].send("still here");
  const frame = new Uint8Array(64);
  const read = await conn.read(frame);
  assert.equal(frame[0], 0x81, "a text frame, not a closed connection");
  assert.equal(
    new TextDecoder().decode(frame.subarray(2, read!)),
    "still here",
  );
  sockets[0].close();
  await readToEnd(conn);
});
