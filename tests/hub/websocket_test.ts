/**
 * The hub's WebSocket message limit counts a message, not a frame: a
 * message sent as fragments each under the limit is refused (close 1009)
 * once the fragments together pass it, and one of exactly the limit is read.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createHub, serveHub } from "../../lib/hub/relay_hub.ts";
import { REFUSAL_REASONS } from "../../lib/relay.ts";
import { tempDir } from "../helpers.ts";
import { clientFrame, upgraded, writeAll } from "../raw_tcp_helpers.ts";

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
