/**
 * WebSocket upgrades of `runner serve`'s HTTP listener: the upgrade request
 * goes through the app like any request (API token, `Host`/`Origin` rules);
 * when `/acp` prepared a connection for it, the socket switches protocols
 * and becomes that connection's WebSocket (the hub's frame reader: a message
 * over the body limit is refused from its header, unread); any other answer
 * is written to the socket as it is, which then closes.
 *
 * @module
 */

import { createHash } from "node:crypto";
import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import { ServerWebSocket } from "../../hub/websocket.ts";
import { type FetchHandler, toRequest } from "../../net/node_bridge.ts";
import { ACP_UPGRADE_HEADER, takeAcpUpgrade } from "../../server/acp/route.ts";

const WEBSOCKET_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/** Options of {@linkcode handleUpgrade}. */
export interface UpgradeOptions {
  /** The app. */
  handler: FetchHandler;
  /** The origin of request URLs. */
  origin: string;
  /** Largest WebSocket message taken, in bytes. */
  maxMessageBytes: number;
  /** Silence after which a ping is sent, then the socket closed, in ms. */
  idleTimeoutMs: number;
}

/** Answers one `Upgrade` request; never rejects. */
export async function handleUpgrade(
  incoming: IncomingMessage,
  socket: Duplex,
  head: Uint8Array,
  options: UpgradeOptions,
): Promise<void> {
  socket.on("error", () => socket.destroy());
  const aborted = new AbortController();
  socket.once("close", () => aborted.abort());
  let response: Response;
  try {
    response = await options.handler(
      toRequest(incoming, options.origin, aborted.signal),
    );
  } catch {
    socket.destroy();
    return;
  }
  const prepared = takeAcpUpgrade(response);
  const key = incoming.headers["sec-websocket-key"];
  if (!prepared || typeof key !== "string" || socket.destroyed) {
    prepared?.reject();
    await writeRaw(socket, response);
    return;
  }
  const accept = createHash("sha1").update(key + WEBSOCKET_GUID).digest(
    "base64",
  );
  socket.write(
    "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\n" +
      `connection: Upgrade\r\nsec-websocket-accept: ${accept}\r\n` +
      `acp-connection-id: ${prepared.connectionId}\r\n\r\n`,
  );
  const webSocket = new ServerWebSocket(duplexConn(socket), {
    maxMessageBytes: options.maxMessageBytes,
    idleTimeoutMs: options.idleTimeoutMs,
    initial: head.length ? new Uint8Array(head) : undefined,
  });
  prepared.accept(webSocket);
}

/** Writes a refusal (or any non-upgrade answer) to a raw socket and closes it. */
async function writeRaw(socket: Duplex, response: Response): Promise<void> {
  const body = new Uint8Array(
    await response.arrayBuffer().catch(() => new ArrayBuffer(0)),
  );
  const lines = [
    `HTTP/1.1 ${response.status} ${response.statusText || "Refused"}`,
  ];
  for (const [name, value] of response.headers) {
    if (name === ACP_UPGRADE_HEADER || name === "content-length") continue;
    lines.push(`${name}: ${value}`);
  }
  lines.push(`content-length: ${body.length}`, "connection: close", "", "");
  if (socket.destroyed) return;
  socket.write(lines.join("\r\n"));
  socket.end(body);
}

/**
 * An upgraded socket as the connection the hub's WebSocket reads and writes
 * (`read`, `write`, `close`), with the node stream's backpressure.
 */
function duplexConn(socket: Duplex): Deno.Conn {
  const queued: Uint8Array[] = [];
  let ended = false;
  let wake: (() => void) | undefined;
  socket.on("data", (chunk: Uint8Array) => {
    queued.push(chunk);
    socket.pause();
    wake?.();
  });
  const finish = () => {
    ended = true;
    wake?.();
  };
  socket.on("end", finish);
  socket.on("close", finish);
  const conn = {
    async read(buffer: Uint8Array): Promise<number | null> {
      while (!queued.length) {
        if (ended) return null;
        socket.resume();
        await new Promise<void>((resolve) => wake = resolve);
        wake = undefined;
      }
      const chunk = queued[0];
      const count = Math.min(chunk.length, buffer.length);
      buffer.set(chunk.subarray(0, count));
      if (count === chunk.length) queued.shift();
      else queued[0] = chunk.subarray(count);
      return count;
    },
    write(bytes: Uint8Array): Promise<number> {
      if (socket.destroyed) return Promise.reject(new Error("socket closed"));
      return new Promise((resolve, reject) => {
        socket.write(
          bytes,
          (error) => error ? reject(error) : resolve(bytes.length),
        );
      });
    },
    close() {
      socket.destroy();
    },
  };
  return conn as unknown as Deno.Conn;
}
