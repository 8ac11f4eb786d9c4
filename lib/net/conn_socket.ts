/**
 * A `Deno.Conn` as the socket a `node:http` server takes (`emit("connection")`
 * accepts any duplex stream): reads with backpressure, writes in order,
 * `setTimeout` on inactivity (the keep-alive timeout), `destroySoon`, and the
 * remote address. It lets the HTTP listeners accept connections with
 * `Deno.listen`, whose accept loop survives running out of file descriptors
 * (the `node:net` one stops accepting for good).
 *
 * @module
 */

import { Buffer } from "node:buffer";
import { Duplex } from "node:stream";

/** A read waiting on an idle connection holds its buffer: start small. */
const FIRST_READ_SIZE = 1024;
const MAX_READ_SIZE = 64 * 1024;
/** How long a closing socket reads what the client still sends (see `_destroy`). */
const LINGER_MS = 2000;
/** Sockets of this process that may linger at once; past it they close at once. */
const MAX_LINGERING = 64;
let lingering = 0;

/** A `node:net`-like socket over a `Deno.Conn`. */
export class ConnSocket extends Duplex {
  /** The client's address. */
  readonly remoteAddress?: string;
  /** The client's port. */
  readonly remotePort?: number;
  /** The client's address family. */
  readonly remoteFamily?: string;
  /** Bytes read from the client so far. */
  bytesRead = 0;
  /** Bytes written to the client so far. */
  bytesWritten = 0;
  #conn: Deno.Conn;
  #reading = false;
  #timeoutMs = 0;
  #lastActive = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #draining = false;
  #connClosed = false;
  #released = Promise.withResolvers<void>();
  /** Whether closing may first drain what the client still sends (default true). */
  linger = true;

  /** Wraps `conn` (which the socket then owns and closes). */
  constructor(conn: Deno.Conn) {
    super({ allowHalfOpen: true });
    this.#conn = conn;
    const remote = conn.remoteAddr as Deno.NetAddr;
    this.remoteAddress = remote.hostname;
    this.remotePort = remote.port;
    this.remoteFamily = remote.hostname.includes(":") ? "IPv6" : "IPv4";
  }

  override _read(): void {
    if (this.#reading) return;
    this.#reading = true;
    void this.#pump();
  }

  async #pump(): Promise<void> {
    let size = FIRST_READ_SIZE;
    try {
      for (;;) {
        const chunk = new Uint8Array(size);
        const read = await this.#conn.read(chunk);
        if (this.#draining) {
          if (read === null) return;
          continue;
        }
        if (this.destroyed) return;
        if (read === null) return void this.push(null);
        this.bytesRead += read;
        this.#touch();
        size = read === size
          ? Math.min(MAX_READ_SIZE, size * 4)
          : FIRST_READ_SIZE;
        const more = this.push(
          Buffer.from(chunk.buffer, chunk.byteOffset, read),
        );
        if (!more) return;
      }
    } catch (error) {
      if (!this.destroyed) this.destroy(error as Error);
    } finally {
      this.#reading = false;
      if (this.#draining) this.#closeConn();
      if (this.#connClosed) this.#released.resolve();
    }
  }

  /** Resolves once the connection is closed and no read holds it (its descriptor is free). */
  get released(): Promise<void> {
    return this.#released.promise;
  }

  override _write(
    chunk: Uint8Array,
    _encoding: string,
    callback: (error?: Error | null) => void,
  ): void {
    this.#writeAll(chunk).then(() => callback(), callback);
  }

  override _writev(
    chunks: { chunk: Uint8Array }[],
    callback: (error?: Error | null) => void,
  ): void {
    const all = chunks.length === 1
      ? chunks[0].chunk
      : Buffer.concat(chunks.map(({ chunk }) => chunk));
    this.#writeAll(all).then(() => callback(), callback);
  }

  async #writeAll(bytes: Uint8Array): Promise<void> {
    let written = 0;
    while (written < bytes.length) {
      written += await this.#conn.write(bytes.subarray(written));
      this.#touch();
    }
    this.bytesWritten += bytes.length;
  }

  override _final(callback: (error?: Error | null) => void): void {
    (this.#conn as Deno.TcpConn).closeWrite().then(
      () => callback(),
      () => callback(),
    );
  }

  /**
   * Closes the connection. After a complete answer, while the client may
   * still be sending (a request body nobody read), it first reads and drops
   * that for a moment: closing with unread data resets the connection, and
   * the client could lose the answer.
   */
  override _destroy(
    error: Error | null,
    callback: (error?: Error | null) => void,
  ): void {
    clearTimeout(this.#timer);
    const drain = !error && this.linger && this.writableFinished &&
      !this.readableEnded && lingering < MAX_LINGERING;
    if (!drain) {
      this.#closeConn();
      return callback(error);
    }
    lingering++;
    this.#draining = true;
    const timer = setTimeout(() => this.#closeConn(), LINGER_MS);
    Deno.unrefTimer(timer);
    this.#onClosed = () => {
      clearTimeout(timer);
      lingering--;
    };
    if (!this.#reading) {
      this.#reading = true;
      void this.#pump();
    }
    callback(error);
  }

  #onClosed: (() => void) | undefined;

  #closeConn(): void {
    this.#connClosed = true;
    try {
      this.#conn.close();
    } catch { /* closed */ }
    if (!this.#reading) this.#released.resolve();
    const onClosed = this.#onClosed;
    this.#onClosed = undefined;
    onClosed?.();
  }

  /** Ends the writable side, then destroys the socket once that is flushed. */
  destroySoon(): void {
    if (this.writable) this.end();
    if (this.writableFinished) this.destroy();
    else this.once("finish", () => this.destroy());
  }

  /** Emits `timeout` after `ms` without reads or writes (0: never). */
  setTimeout(ms: number, onTimeout?: () => void): this {
    this.#timeoutMs = ms;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (onTimeout) this.once("timeout", onTimeout);
    if (ms > 0) {
      this.#lastActive = performance.now();
      this.#arm(ms);
    }
    return this;
  }

  #arm(ms: number): void {
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      if (this.destroyed || this.#timeoutMs === 0) return;
      const left = this.#lastActive + this.#timeoutMs - performance.now();
      if (left > 1) return this.#arm(left);
      this.emit("timeout");
    }, ms);
    Deno.unrefTimer(this.#timer);
  }

  #touch(): void {
    if (this.#timeoutMs > 0) this.#lastActive = performance.now();
  }

  /** Sets `TCP_NODELAY`. */
  setNoDelay(noDelay = true): this {
    try {
      (this.#conn as Deno.TcpConn).setNoDelay(noDelay);
    } catch { /* closed */ }
    return this;
  }

  /** Sets TCP keep-alive probes. */
  setKeepAlive(enable = false): this {
    try {
      (this.#conn as Deno.TcpConn).setKeepAlive(enable);
    } catch { /* closed */ }
    return this;
  }

  /** Present for `node:net` compatibility (does nothing). */
  ref(): this {
    return this;
  }

  /** Present for `node:net` compatibility (does nothing). */
  unref(): this {
    return this;
  }
}
