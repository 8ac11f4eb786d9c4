/**
 * The hub's WebSocket message limit counts a message, not a frame: a
 * message sent as fragments each under the limit is refused (close 1009)
 * once the fragments together pass it, and one of exactly the limit is read.
 * Its `bufferedAmount` counts what a peer has not taken yet.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createHub, serveHub } from "../../lib/hub/relay_hub.ts";
import { ServerWebSocket } from "../../lib/hub/websocket.ts";
import { REFUSAL_REASONS } from "../../lib/relay.ts";
import { tempDir } from "../helpers.ts";
import {
  clientFrame,
  connectTo,
  upgraded,
  writeAll,
} from "../raw_tcp_helpers.ts";

const TOKEN = "hub-fragments-token-Lp3Vx9Qw2Mz6";
const LIMIT = 2000;

/** A `daemon.hello` of exactly `size` bytes. */
function hello(size: number): Uint8Array {
  const bare = JSON.stringify({
    type: "daemon.hello",
    daemon_id: "fragments",
    protocol: "coding-relay-v1",
    token: TOKEN,
    metadata: { padding: "" },
  });
  const text = bare.replace(
    '"padding":""',
    () => `"padding":"${"x".repeat(size - bare.length)}"`,
  );
  assert.equal(text.length, size);
  return new TextEncoder().encode(text);
}

/** Sends `message` as text fragments of `piece` bytes; the hub's first frame back. */
async function sendInFragments(
  message: Uint8Array,
  piece: number,
): Promise<Uint8Array> {
  const stateDir = tempDir();
  const hub = createHub({ token: TOKEN, stateDir });
  const server = serveHub({ hub, limits: { maxMessageBytes: LIMIT } });
  try {
    const conn = await upgraded(server.url);
    for (let at = 0; at < message.length; at += piece) {
      const last = at + piece >= message.length;
      const opcode = at === 0 ? 0x01 : 0x00;
      await writeAll(
        conn,
        clientFrame(
          (last ? 0x80 : 0) | opcode,
          message.subarray(at, at + piece),
        ),
      );
    }
    const answer = new Uint8Array(4096);
    const got = await conn.read(answer);
    conn.close();
    return answer.slice(0, got!);
  } finally {
    await hub.close();
    await server.close();
  }
}

Deno.test("a message in fragments each under the limit is refused with 1009 once together they pass it; exactly the limit is read", async () => {
  for (const piece of [LIMIT / 2, 700, 1]) {
    const refused = await sendInFragments(hello(LIMIT + 1), piece);
    assert.equal(refused[0], 0x88, `a close frame (${piece}-byte fragments)`);
    const length = refused[1] & 0x7f;
    assert.deepEqual({
      code: (refused[2] << 8) | refused[3],
      reason: new TextDecoder().decode(refused.subarray(4, 2 + length)),
    }, { code: 1009, reason: REFUSAL_REASONS.frameTooLarge });
  }
  const read = await sendInFragments(hello(LIMIT), 700);
  assert.equal(read[0], 0x81, "a text frame");
  const text = new TextDecoder().decode(
    read.subarray(2 + (read[1] === 126 ? 2 : 0)),
  );
  assert.equal(JSON.parse(text).type, "daemon.ready");
});

Deno.test("bufferedAmount counts the bytes sent and not yet written, down to none once the peer has read them", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const peer = await connectTo(`http://127.0.0.1:${listener.addr.port}`);
  const socket = new ServerWebSocket(await listener.accept(), {
    maxMessageBytes: 1024,
    idleTimeoutMs: 60_000,
  });
  listener.close();
  const closed = new Promise<void>((resolve) =>
    socket.addEventListener("close", () => resolve(), { once: true })
  );
  try {
    // 8 MiB in 1 MiB messages (frames of 10 bytes of header each), unread.
    const message = "x".repeat(1024 * 1024);
    for (let i = 0; i < 8; i++) socket.send(message);
    const total = 8 * (message.length + 10);
    assert.equal(socket.bufferedAmount, total, "all of it waits at first");

    let read = 0;
    const chunk = new Uint8Array(64 * 1024);
    while (read < total) read += (await peer.read(chunk)) ?? total;
    // The peer closes; the socket answers and finishes its writes first.
    await writeAll(peer, clientFrame(0x88, new Uint8Array([0x03, 0xe8])));
    await closed;
    assert.equal(socket.bufferedAmount, 0, "nothing is left once it was read");
  } finally {
    peer.close();
  }
});
