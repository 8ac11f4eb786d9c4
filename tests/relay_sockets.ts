/**
 * Raw WebSockets for the relay tests: one end of a connection that queues
 * its text frames (each checked against the relay contract when a direction
 * is given), and a bare hub on 127.0.0.1 that hands the test each daemon
 * connection.
 *
 * @module
 */

import type { JsonObject } from "../lib/relay.ts";
import { assertRelayFrame, type RelayDirection } from "./contracts.ts";

/** How a WebSocket closed. */
export interface SocketClose {
  code: number;
  reason: string;
}

/** One end of a raw WebSocket: queued text frames and the close. */
export class TestSocket {
  /** The socket. */
  readonly ws: WebSocket;
  /** Resolves once the socket closed. */
  readonly closed: Promise<SocketClose>;
  #queue: string[] = [];
  #waiters: ((text: string) => void)[] = [];

  /** `receives`: the direction of the frames this end reads, each checked against the relay contract (unchecked without). */
  constructor(ws: WebSocket, receives?: RelayDirection) {
    this.ws = ws;
    ws.addEventListener("message", (event) => {
      const text = String(event.data);
      if (receives) assertRelayFrame(text, receives);
      const waiter = this.#waiters.shift();
      if (waiter) waiter(text);
      else this.#queue.push(text);
    });
    this.closed = new Promise((resolve) =>
      ws.addEventListener(
        "close",
        (event) => resolve({ code: event.code, reason: event.reason }),
      )
    );
  }

  /** Opens a socket to `url` as a daemon would (checking the hub's frames). */
  static async open(url: string): Promise<TestSocket> {
    const socket = new TestSocket(new WebSocket(url), "hub->daemon");
    await new Promise((resolve, reject) => {
      socket.ws.addEventListener("open", resolve, { once: true });
      socket.ws.addEventListener("error", reject, { once: true });
    });
    return socket;
  }

  /** The next text frame; throws once the socket closed instead. */
  nextText(): Promise<string> {
    const queued = this.#queue.shift();
    if (queued !== undefined) return Promise.resolve(queued);
    return Promise.race([
      new Promise<string>((resolve) => this.#waiters.push(resolve)),
      this.closed.then(({ code, reason }) => {
        throw new Error(`the connection closed: ${code} ${reason}`);
      }),
    ]);
  }

  /** The next frame, parsed; throws once the socket closed instead. */
  async next(): Promise<JsonObject> {
    return JSON.parse(await this.nextText());
  }

  /** Sends one text frame. */
  send(text: string): void {
    this.ws.send(text);
  }

  /** Closes from this side (if still open) and waits for the close. */
  async close(code = 1000): Promise<void> {
    if (this.ws.readyState === WebSocket.OPEN) this.ws.close(code);
    await this.closed;
  }
}

/** A bare WebSocket server standing in for the hub: hands the test each connection. */
export class ScriptedHub {
  /** Where daemons dial (`ws://127.0.0.1:…`). */
  readonly url: string;
  /** Every connection accepted so far. */
  readonly sockets: TestSocket[] = [];
  #accepted: TestSocket[] = [];
  #waiters: ((socket: TestSocket) => void)[] = [];
  #server: Deno.HttpServer<Deno.NetAddr>;

  /** `receives`: the direction its sockets check (`daemon->hub`), or none. */
  constructor(receives?: RelayDirection) {
    this.#server = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen() {} },
      (request) => {
        const { socket, response } = Deno.upgradeWebSocket(request);
        const side = new TestSocket(socket, receives);
        this.sockets.push(side);
        const waiter = this.#waiters.shift();
        if (waiter) waiter(side);
        else this.#accepted.push(side);
        return response;
      },
    );
    this.url = `ws://127.0.0.1:${this.#server.addr.port}`;
  }

  /** The next accepted connection, in arrival order, once it is open. */
  async accept(): Promise<TestSocket> {
    const side = this.#accepted.shift() ??
      await new Promise<TestSocket>((resolve) => this.#waiters.push(resolve));
    if (side.ws.readyState === WebSocket.CONNECTING) {
      await new Promise((resolve) =>
        side.ws.addEventListener("open", resolve, { once: true })
      );
    }
    return side;
  }

  /** Closes every connection still open (1001) and stops listening. */
  async close(): Promise<void> {
    for (const side of this.sockets) await side.close(1001);
    await this.#server.shutdown();
  }
}
