/**
 * What a peer sees of the hub's server WebSocket frame by frame: messages
 * at and around the size cap (one frame or fragments), control frames that
 * break the rules, continuations out of order, invalid UTF-8, binary
 * messages, and data sent after the close started.
 *
 * @module
 */

import assert from "node:assert/strict";
import { ServerWebSocket } from "../../lib/hub/websocket.ts";
import { clientFrame, connectTo, writeAll } from "../raw_tcp_helpers.ts";

const LIMIT = 300;

/** One server frame as the peer reads it. */
interface ServerFrame {
  fin: boolean;
  opcode: number;
  /** The 7-bit length field: the length, or 126 / 127 for a longer one. */
  marker: number;
  payload: Uint8Array;
}

/** A server socket and its raw peer, with what the socket reported. */
interface Pair {
  socket: ServerWebSocket;
  peer: Deno.TcpConn;
  messages: (string | ArrayBuffer)[];
  closed: Promise<CloseEvent>;
  /** The next frame the server wrote; undefined once the connection ended. */
  nextFrame(): Promise<ServerFrame | undefined>;
}

async function pair(
  options: { tooBigReason?: string; maxMessageBytes?: number } = {},
): Promise<Pair> {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const peer = await connectTo(`http://127.0.0.1:${listener.addr.port}`);
  const socket = new ServerWebSocket(await listener.accept(), {
    maxMessageBytes: LIMIT,
    idleTimeoutMs: 60_000,
    ...options,
  });
  listener.close();
  const messages: (string | ArrayBuffer)[] = [];
  socket.addEventListener("message", (event) => {
    messages.push((event as MessageEvent).data);
  });
  const closed = new Promise<CloseEvent>((resolve) =>
    socket.addEventListener("close", (e) => resolve(e as CloseEvent), {
      once: true,
    })
  );
  let pending = new Uint8Array();
  async function fill(count: number): Promise<boolean> {
    while (pending.length < count) {
      const chunk = new Uint8Array(65536);
      const got = await peer.read(chunk).catch(() => null);
      if (got === null) return false;
      const joined = new Uint8Array(pending.length + got);
      joined.set(pending);
      joined.set(chunk.subarray(0, got), pending.length);
      pending = joined;
    }
    return true;
  }
  async function nextFrame(): Promise<ServerFrame | undefined> {
    if (!await fill(2)) return undefined;
    let length = pending[1] & 0x7f;
    let offset = 2;
    if (length === 126) {
      if (!await fill(4)) return undefined;
      length = (pending[2] << 8) | pending[3];
      offset = 4;
    } else if (length === 127) {
      if (!await fill(10)) return undefined;
      length = Number(new DataView(pending.buffer, 2, 8).getBigUint64(0));
      offset = 10;
    }
    if (!await fill(offset + length)) return undefined;
    const frame = {
      fin: (pending[0] & 0x80) !== 0,
      opcode: pending[0] & 0x0f,
      marker: pending[1] & 0x7f,
      payload: pending.slice(offset, offset + length),
    };
    pending = pending.slice(offset + length);
    return frame;
  }
  return { socket, peer, messages, closed, nextFrame };
}

function closeCode(frame: ServerFrame | undefined): {
  opcode?: number;
  code?: number;
  reason?: string;
} {
  if (!frame) return {};
  return {
    opcode: frame.opcode,
    code: (frame.payload[0] << 8) | frame.payload[1],
    reason: new TextDecoder().decode(frame.payload.subarray(2)),
  };
}

const bytes = (size: number, fill = 0x61) => new Uint8Array(size).fill(fill);

/** Sends a close, waits for the socket to end, closes the peer. */
async function finish(p: Pair): Promise<CloseEvent> {
  await writeAll(p.peer, clientFrame(0x88, new Uint8Array([0x03, 0xe8])))
    .catch(() => {});
  const event = await p.closed;
  p.peer.close();
  return event;
}

Deno.test("one frame of exactly the limit is read; one byte more is refused with 1009 and never delivered", async () => {
  const at = await pair();
  await writeAll(at.peer, clientFrame(0x81, bytes(LIMIT)));
  await finish(at);
  assert.deepEqual(at.messages, ["a".repeat(LIMIT)]);

  const over = await pair({ tooBigReason: "too big here" });
  await writeAll(over.peer, clientFrame(0x81, bytes(LIMIT + 1)));
  assert.deepEqual(closeCode(await over.nextFrame()), {
    opcode: 8,
    code: 1009,
    reason: "too big here",
  });
  const event = await finish(over);
  assert.deepEqual(over.messages, []);
  assert.equal(event.code, 1009);
});

Deno.test("without a reason of its own the 1009 close says 'message too big'", async () => {
  const over = await pair();
  await writeAll(over.peer, clientFrame(0x82, bytes(LIMIT + 1)));
  assert.deepEqual(closeCode(await over.nextFrame()), {
    opcode: 8,
    code: 1009,
    reason: "message too big",
  });
  await finish(over);
  assert.deepEqual(over.messages, []);
});

Deno.test("the limit counts each message anew: two fragmented messages of the limit each are both read", async () => {
  const p = await pair();
  for (let n = 0; n < 2; n++) {
    await writeAll(p.peer, clientFrame(0x01, bytes(LIMIT / 2)));
    await writeAll(p.peer, clientFrame(0x80, bytes(LIMIT / 2, 0x62)));
  }
  const event = await finish(p);
  const whole = "a".repeat(LIMIT / 2) + "b".repeat(LIMIT / 2);
  assert.deepEqual(p.messages, [whole, whole]);
  assert.equal(event.code, 1000);
});

Deno.test("a binary message in fragments arrives whole as an ArrayBuffer", async () => {
  const p = await pair();
  await writeAll(p.peer, clientFrame(0x02, new Uint8Array([1, 2])));
  await writeAll(p.peer, clientFrame(0x00, new Uint8Array([3])));
  await writeAll(p.peer, clientFrame(0x80, new Uint8Array([4, 5])));
  await finish(p);
  assert.equal(p.messages.length, 1);
  assert.ok(p.messages[0] instanceof ArrayBuffer);
  assert.deepEqual(
    [...new Uint8Array(p.messages[0] as ArrayBuffer)],
    [1, 2, 3, 4, 5],
  );
});

Deno.test("a continuation with no message started, or a new message inside one, fails the connection with 1002", async () => {
  for (
    const frames of [
      [clientFrame(0x80, bytes(3))],
      [clientFrame(0x01, bytes(3)), clientFrame(0x81, bytes(3))],
    ]
  ) {
    const p = await pair();
    for (const frame of frames) await writeAll(p.peer, frame);
    assert.deepEqual(closeCode(await p.nextFrame()), {
      opcode: 8,
      code: 1002,
      reason: "unexpected continuation",
    });
    const event = await finish(p);
    assert.equal(event.code, 1002);
    assert.deepEqual(p.messages, []);
  }
});

Deno.test("text that is not UTF-8 fails the connection with 1007", async () => {
  const p = await pair();
  await writeAll(p.peer, clientFrame(0x81, new Uint8Array([0xc3, 0x28])));
  assert.deepEqual(closeCode(await p.nextFrame()), {
    opcode: 8,
    code: 1007,
    reason: "invalid UTF-8",
  });
  await finish(p);
  assert.deepEqual(p.messages, []);
});

Deno.test("a control frame over 125 bytes or fragmented fails the connection with 1002; a ping of 125 bytes is answered", async () => {
  const ok = await pair();
  await writeAll(ok.peer, clientFrame(0x89, bytes(125, 0x70)));
  const pong = await ok.nextFrame();
  assert.deepEqual(
    { opcode: pong?.opcode, payload: pong?.payload },
    { opcode: 10, payload: bytes(125, 0x70) },
  );
  await writeAll(ok.peer, clientFrame(0x81, bytes(2, 0x7a)));
  await finish(ok);
  assert.deepEqual(ok.messages, ["zz"], "a message after the ping is read");

  for (
    const frame of [clientFrame(0x89, bytes(126)), clientFrame(0x09, bytes(1))]
  ) {
    const p = await pair();
    await writeAll(p.peer, frame);
    assert.deepEqual(closeCode(await p.nextFrame()), {
      opcode: 8,
      code: 1002,
      reason: "bad control frame",
    });
    assert.equal((await finish(p)).code, 1002);
  }
});

Deno.test("data sent after the server started closing is skipped unread, even past the limit; the peer's close still ends it", async () => {
  const p = await pair();
  p.socket.close(4000, "bye");
  assert.deepEqual(closeCode(await p.nextFrame()), {
    opcode: 8,
    code: 4000,
    reason: "bye",
  });
  await writeAll(p.peer, clientFrame(0x81, bytes(10)));
  await writeAll(p.peer, clientFrame(0x82, bytes(LIMIT * 3)));
  await writeAll(p.peer, clientFrame(0x89, bytes(1)));
  await writeAll(p.peer, clientFrame(0x88, new Uint8Array([0x03, 0xe8])));
  const event = await p.closed;
  assert.equal(await p.nextFrame(), undefined, "no pong while closing");
  p.peer.close();
  assert.deepEqual(p.messages, []);
  assert.deepEqual({ code: event.code, reason: event.reason }, {
    code: 4000,
    reason: "bye",
  });
});

Deno.test("a fragmented message finished after the server started closing is not delivered", async () => {
  const p = await pair();
  await writeAll(p.peer, clientFrame(0x01, bytes(10)));
  // The first fragment is read before the close starts (a ping's answer shows it).
  await writeAll(p.peer, clientFrame(0x89, new Uint8Array()));
  assert.equal((await p.nextFrame())?.opcode, 10);
  p.socket.close(4001, "");
  await writeAll(p.peer, clientFrame(0x80, bytes(10)));
  await finish(p);
  assert.deepEqual(p.messages, []);
});

Deno.test("a silent peer is pinged, a pong keeps it, and one that stays silent after a ping is closed with 1001", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const peer = await connectTo(`http://127.0.0.1:${listener.addr.port}`);
  const socket = new ServerWebSocket(await listener.accept(), {
    maxMessageBytes: LIMIT,
    idleTimeoutMs: 30,
  });
  listener.close();
  const closed = new Promise<CloseEvent>((resolve) =>
    socket.addEventListener("close", (e) => resolve(e as CloseEvent))
  );
  const frames: number[] = [];
  const chunk = new Uint8Array(64);
  for (;;) {
    const got = await peer.read(chunk);
    if (got === null) break;
    frames.push(chunk[0]);
    // Answer the first ping only.
    if (frames.length === 1) {
      await writeAll(peer, clientFrame(0x8a, new Uint8Array()));
    }
  }
  const event = await closed;
  peer.close();
  assert.deepEqual(frames, [0x89, 0x89], "a ping, answered; a ping, not");
  assert.deepEqual({ code: event.code, reason: event.reason }, {
    code: 1001,
    reason: "no pong",
  });
});

/** A masked client frame with a 64-bit length field of `high`:`low` and `payload`. */
function longFrame(
  first: number,
  high: number,
  low: number,
  payload: Uint8Array,
): Uint8Array {
  const frame = new Uint8Array(14 + payload.length);
  frame[0] = first;
  frame[1] = 0x80 | 127;
  const view = new DataView(frame.buffer);
  view.setUint32(2, high);
  view.setUint32(6, low);
  frame.set([1, 2, 3, 4], 10);
  payload.forEach((byte, i) => frame[14 + i] = byte ^ [1, 2, 3, 4][i & 3]);
  return frame;
}

Deno.test("a 64-bit length is read whole: a small message so sent is read, one past the limit or past 4 GiB is refused with 1009", async () => {
  const small = await pair();
  await writeAll(small.peer, longFrame(0x81, 0, 5, bytes(5)));
  await finish(small);
  assert.deepEqual(small.messages, ["aaaaa"]);

  for (const [high, low] of [[0, LIMIT + 1], [1, 0], [0x80000000, 5]]) {
    const p = await pair();
    await writeAll(p.peer, longFrame(0x82, high, low, bytes(5)));
    assert.deepEqual(closeCode(await p.nextFrame()), {
      opcode: 8,
      code: 1009,
      reason: "message too big",
    }, `length ${high}:${low}`);
    p.peer.close();
    await p.closed;
    assert.deepEqual(p.messages, []);
  }
});

Deno.test("reserved bits, an unmasked frame or an unknown opcode fail the connection with 1002", async () => {
  const cases: [Uint8Array, string][] = [
    [clientFrame(0xc1, bytes(2)), "protocol error"],
    [clientFrame(0x91, bytes(2)), "protocol error"],
    [new Uint8Array([0x81, 0x02, 0x61, 0x61]), "protocol error"],
    [clientFrame(0x83, bytes(2)), "unknown opcode"],
    [clientFrame(0x8b, bytes(2)), "unknown opcode"],
  ];
  for (const [frame, reason] of cases) {
    const p = await pair();
    await writeAll(p.peer, frame);
    assert.deepEqual(closeCode(await p.nextFrame()), {
      opcode: 8,
      code: 1002,
      reason,
    }, `first byte ${frame[0].toString(16)}`);
    assert.equal((await finish(p)).code, 1002);
    assert.deepEqual(p.messages, []);
  }
});

Deno.test("the peer's close is echoed with its code (1000 when it gave none) and reported with its reason", async () => {
  const bare = await pair();
  await writeAll(bare.peer, clientFrame(0x88, new Uint8Array()));
  assert.deepEqual(closeCode(await bare.nextFrame()), {
    opcode: 8,
    code: 1000,
    reason: "",
  });
  const bareEvent = await bare.closed;
  bare.peer.close();
  assert.deepEqual(
    { code: bareEvent.code, wasClean: bareEvent.wasClean },
    { code: 1005, wasClean: true },
  );

  const coded = await pair();
  await writeAll(
    coded.peer,
    clientFrame(0x88, new Uint8Array([0x0f, 0xa2, 0x68, 0x69])),
  );
  assert.deepEqual(closeCode(await coded.nextFrame()), {
    opcode: 8,
    code: 4002,
    reason: "",
  });
  const event = await coded.closed;
  assert.equal(await coded.nextFrame(), undefined, "then the connection ends");
  coded.peer.close();
  assert.deepEqual({ code: event.code, reason: event.reason }, {
    code: 4002,
    reason: "hi",
  });
  assert.equal(coded.socket.readyState, WebSocket.CLOSED);
});

Deno.test("a peer that drops the connection is reported closed with 1006, not clean", async () => {
  const p = await pair();
  p.peer.close();
  const event = await p.closed;
  assert.deepEqual(
    { code: event.code, wasClean: event.wasClean },
    { code: 1006, wasClean: false },
  );
});

Deno.test("close() sends one close frame with its reason cut to 123 bytes; send() after it throws", async () => {
  const p = await pair();
  p.socket.close(4003, "r".repeat(200));
  p.socket.close(4004, "again");
  assert.equal(p.socket.readyState, WebSocket.CLOSING);
  assert.throws(() => p.socket.send("late"), { name: "InvalidStateError" });
  assert.deepEqual(closeCode(await p.nextFrame()), {
    opcode: 8,
    code: 4003,
    reason: "r".repeat(123),
  });
  await writeAll(p.peer, clientFrame(0x88, new Uint8Array([0x03, 0xe8])));
  const event = await p.closed;
  assert.equal(await p.nextFrame(), undefined, "no second close frame");
  p.peer.close();
  assert.equal(event.code, 4003);
});

Deno.test("messages sent are framed with the shortest length field at each length encoding's edges", async () => {
  const p = await pair();
  const sizes = [0, 125, 126, 65535, 65536, 70000];
  for (const size of sizes) p.socket.send("m".repeat(size));
  for (const size of sizes) {
    const frame = await p.nextFrame();
    assert.deepEqual(
      {
        fin: frame?.fin,
        opcode: frame?.opcode,
        length: frame?.payload.length,
        marker: frame?.marker,
      },
      {
        fin: true,
        opcode: 1,
        length: size,
        marker: size < 126 ? size : size < 65536 ? 126 : 127,
      },
    );
    assert.ok(frame!.payload.every((byte) => byte === 0x6d));
  }
  await finish(p);
});

Deno.test("a frame larger than one read is waited for and read whole", async () => {
  const p = await pair({ maxMessageBytes: 100_000 });
  const payload = new Uint8Array(50_000).map((_, i) => 0x61 + (i % 26));
  await writeAll(p.peer, longFrame(0x81, 0, payload.length, payload));
  await finish(p);
  assert.deepEqual(p.messages, [new TextDecoder().decode(payload)]);
});
