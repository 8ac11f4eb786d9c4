/**
 * The server end of a WebSocket (RFC 6455) over a raw TCP connection, with
 * the one property the runtime's own server lacks: a message over
 * `maxMessageBytes` is refused from its frame header (close 1009) before any
 * of it is buffered, so an unauthenticated peer cannot make the hub hold
 * tens of MiB. It behaves like the browser `WebSocket` as far as the hub and
 * `/acp` use one (`readyState`, `bufferedAmount`, `send`, `close`, `message`
 * and `close` events) and pings a silent peer, closing it when no answer
 * comes.
 *
 * @module
 */

import { ReadBuffer } from "./read_buffer.ts";
import { CLOSE_TOO_BIG } from "../relay.ts";
import { settleWithin } from "../timing.ts";

/** Options of {@linkcode ServerWebSocket}. */
export interface ServerWebSocketOptions {
  /** Largest message accepted, in bytes (all fragments together). */
  maxMessageBytes: number;
  /** Silence after which a ping is sent, and then the connection closed, in ms. */
  idleTimeoutMs: number;
  /** Bytes already read past the HTTP head (the first frames, if any). */
  initial?: Uint8Array;
  /** The close reason sent with 1009 (default "message too big"). */
  tooBigReason?: string;
}

const OPCODE = {
  continuation: 0,
  text: 1,
  binary: 2,
  close: 8,
  ping: 9,
  pong: 10,
} as const;

const CLOSE_PROTOCOL = 1002;
const CLOSE_INVALID_DATA = 1007;
const CLOSE_GOING_AWAY = 1001;
const CLOSE_NO_STATUS = 1005;
const CLOSE_ABNORMAL = 1006;

/** One parsed frame header. */
interface FrameHeader {
  fin: boolean;
  opcode: number;
  length: number;
  mask: Uint8Array;
  headerLength: number;
}

/** The header at the start of `buffer`, undefined until it is complete, or an error close code. */
function parseHeader(buffer: Uint8Array): FrameHeader | undefined | number {
  if (buffer.length < 2) return undefined;
  const fin = (buffer[0] & 0x80) !== 0;
  if ((buffer[0] & 0x70) !== 0) return CLOSE_PROTOCOL; // no extension negotiated
  const opcode = buffer[0] & 0x0f;
  if ((buffer[1] & 0x80) === 0) return CLOSE_PROTOCOL; // clients must mask
  let length = buffer[1] & 0x7f;
  let offset = 2;
  if (length === 126) {
    if (buffer.length < 4) return undefined;
    length = (buffer[2] << 8) | buffer[3];
    offset = 4;
  } else if (length === 127) {
    if (buffer.length < 10) return undefined;
    const view = new DataView(buffer.buffer, buffer.byteOffset + 2, 8);
    const high = view.getUint32(0);
    // Anything past 2^32 bytes is far over any limit: report it as huge.
    length = high ? Number.MAX_SAFE_INTEGER : view.getUint32(4);
    offset = 10;
  }
  if (buffer.length < offset + 4) return undefined;
  return {
    fin,
    opcode,
    length,
    mask: buffer.slice(offset, offset + 4),
    headerLength: offset + 4,
  };
}

/** An unmasked server frame. */
export function encodeFrame(opcode: number, payload: Uint8Array): Uint8Array {
  const length = payload.length;
  const extra = length < 126 ? 0 : length < 65536 ? 2 : 8;
  const frame = new Uint8Array(2 + extra + length);
  frame[0] = 0x80 | opcode;
  if (extra === 0) frame[1] = length;
  else if (extra === 2) {
    frame[1] = 126;
    frame[2] = length >> 8;
    frame[3] = length & 0xff;
  } else {
    frame[1] = 127;
    new DataView(frame.buffer).setUint32(6, length);
  }
  frame.set(payload, 2 + extra);
  return frame;
}

function closePayload(code: number, reason: string): Uint8Array {
  const text = new TextEncoder().encode(reason).slice(0, 123);
  const payload = new Uint8Array(2 + text.length);
  payload[0] = code >> 8;
  payload[1] = code & 0xff;
  payload.set(text, 2);
  return payload;
}

function joinFragments(fragments: Uint8Array[], total: number): Uint8Array {
  if (fragments.length === 1) return fragments[0];
  const joined = new Uint8Array(total);
  let offset = 0;
  for (const fragment of fragments) {
    joined.set(fragment, offset);
    offset += fragment.length;
  }
  return joined;
}

/** A server-side WebSocket on an accepted, upgraded TCP connection. */
export class ServerWebSocket extends EventTarget {
  /** `WebSocket.OPEN` and friends, as the browser API numbers them. */
  readyState: number = WebSocket.OPEN;
  /** Kept for API likeness; binary messages arrive as `ArrayBuffer`. */
  binaryType: BinaryType = "arraybuffer";
  readonly #conn: Deno.Conn;
  readonly #options: ServerWebSocketOptions;
  readonly #buffer: ReadBuffer;
  #fragments: Uint8Array[] = [];
  #fragmentBytes = 0;
  #fragmentOpcode = 0;
  /** Payload bytes still to be skipped unread (a refused or late frame). */
  #skip = 0;
  #writing: Promise<void> = Promise.resolve();
  #unsentBytes = 0;
  #heardSinceCheck = true;
  #pinged = false;
  #idleTimer: ReturnType<typeof setInterval>;
  #closeTimer: ReturnType<typeof setTimeout> | undefined;
  #closeEvent: { code: number; reason: string } | undefined;

  /** Starts reading frames from `conn` (already upgraded). */
  constructor(conn: Deno.Conn, options: ServerWebSocketOptions) {
    super();
    this.#conn = conn;
    this.#options = options;
    this.#buffer = new ReadBuffer(options.initial);
    this.#idleTimer = setInterval(
      () => this.#checkIdle(),
      options.idleTimeoutMs,
    );
    void this.#readLoop();
  }

  /**
   * Bytes of frames queued and not yet written to the connection, as the
   * browser `WebSocket` reports them: what a peer that does not read makes
   * this side hold (the ACP SDK waits while it is high).
   */
  get bufferedAmount(): number {
    return this.#unsentBytes;
  }

  /** Sends a text message (dropped once closing). */
  send(data: string): void {
    if (this.readyState !== WebSocket.OPEN) {
      throw new DOMException("the WebSocket is not open", "InvalidStateError");
    }
    this.#write(encodeFrame(OPCODE.text, new TextEncoder().encode(data)));
  }

  /** Starts the closing handshake; the connection is dropped if it does not finish in 2 s. */
  close(code = 1000, reason = ""): void {
    if (this.readyState !== WebSocket.OPEN) return;
    this.readyState = WebSocket.CLOSING;
    this.#closeEvent ??= { code, reason };
    this.#write(encodeFrame(OPCODE.close, closePayload(code, reason)));
    this.#closeTimer = setTimeout(() => this.#finish(), 2000);
  }

  #write(frame: Uint8Array): void {
    this.#unsentBytes += frame.length;
    this.#writing = this.#writing.then(async () => {
      let written = 0;
      while (written < frame.length) {
        const count = await this.#conn.write(frame.subarray(written));
        written += count;
        this.#unsentBytes -= count;
      }
    }).catch(() => this.#finish());
  }

  #checkIdle(): void {
    if (this.#heardSinceCheck) {
      this.#heardSinceCheck = false;
      this.#pinged = false;
      return;
    }
    if (this.#pinged) {
      this.#closeEvent ??= { code: CLOSE_GOING_AWAY, reason: "no pong" };
      this.#finish();
      return;
    }
    this.#pinged = true;
    if (this.readyState === WebSocket.OPEN) {
      this.#write(encodeFrame(OPCODE.ping, new Uint8Array()));
    }
  }

  async #readLoop(): Promise<void> {
    try {
      while (this.readyState !== WebSocket.CLOSED) {
        if (!this.#takeFrames()) break;
        const read = await this.#conn.read(this.#buffer.room());
        if (read === null) break;
        this.#heardSinceCheck = true;
        this.#buffer.commit(read);
        // Skipping only starts with nothing else buffered: these are its bytes.
        const skipped = Math.min(this.#skip, read);
        this.#skip -= skipped;
        this.#buffer.consume(skipped);
      }
    } catch { /* reset by the peer */ }
    // Let a close frame already queued go out (a peer that does not read gets 2 s).
    await settleWithin(this.#writing, 2000);
    this.#finish();
  }

  /** Handles every complete frame buffered; false once the connection must end. */
  #takeFrames(): boolean {
    for (;;) {
      const header = parseHeader(this.#buffer.view);
      if (header === undefined) return true;
      if (typeof header === "number") {
        return this.#fail(header, "protocol error");
      }
      const verdict = this.#judge(header);
      if (verdict === "fail") return false;
      const end = header.headerLength + header.length;
      if (verdict === "skip") {
        // Drop the payload as it arrives instead of holding it.
        this.#skip = Math.max(0, end - this.#buffer.length);
        this.#buffer.consume(end);
        continue;
      }
      if (this.#buffer.length < end) return true;
      const payload = this.#buffer.view.slice(header.headerLength, end);
      for (let i = 0; i < payload.length; i++) payload[i] ^= header.mask[i & 3];
      this.#buffer.consume(end);
      if (!this.#onFrame(header, payload)) return false;
    }
  }

  /**
   * Judges a frame by its header alone: a malformed control frame fails the
   * connection; oversized data is refused (close 1009) and, like any data
   * arriving while closing, skipped unread until the peer's close frame.
   */
  #judge(header: FrameHeader): "take" | "skip" | "fail" {
    if (header.opcode >= OPCODE.close) {
      if (header.length > 125 || !header.fin) {
        this.#fail(CLOSE_PROTOCOL, "bad control frame");
        return "fail";
      }
      return "take";
    }
    if (this.readyState !== WebSocket.OPEN) return "skip";
    if (this.#fragmentBytes + header.length > this.#options.maxMessageBytes) {
      this.#fragments = [];
      this.#fragmentBytes = 0;
      this.close(
        CLOSE_TOO_BIG,
        this.#options.tooBigReason ?? "message too big",
      );
      return "skip";
    }
    return "take";
  }

  #onFrame(header: FrameHeader, payload: Uint8Array): boolean {
    switch (header.opcode) {
      case OPCODE.ping:
        if (this.readyState === WebSocket.OPEN) {
          this.#write(encodeFrame(OPCODE.pong, payload));
        }
        return true;
      case OPCODE.pong:
        return true;
      case OPCODE.close:
        return this.#onClose(payload);
      case OPCODE.text:
      case OPCODE.binary:
      case OPCODE.continuation:
        return this.#onData(header, payload);
      default:
        return this.#fail(CLOSE_PROTOCOL, "unknown opcode");
    }
  }

  #onData(header: FrameHeader, payload: Uint8Array): boolean {
    const continuing = this.#fragments.length > 0;
    if ((header.opcode === OPCODE.continuation) !== continuing) {
      return this.#fail(CLOSE_PROTOCOL, "unexpected continuation");
    }
    if (!continuing) this.#fragmentOpcode = header.opcode;
    this.#fragments.push(payload);
    this.#fragmentBytes += payload.length;
    if (!header.fin) return true;
    const message = joinFragments(this.#fragments, this.#fragmentBytes);
    this.#fragments = [];
    this.#fragmentBytes = 0;
    if (this.readyState !== WebSocket.OPEN) return true;
    let data: string | ArrayBuffer;
    if (this.#fragmentOpcode === OPCODE.text) {
      try {
        data = new TextDecoder("utf-8", { fatal: true }).decode(message);
      } catch {
        return this.#fail(CLOSE_INVALID_DATA, "invalid UTF-8");
      }
    } else data = message.buffer as ArrayBuffer;
    this.dispatchEvent(new MessageEvent("message", { data }));
    return true;
  }

  #onClose(payload: Uint8Array): boolean {
    const code = payload.length >= 2
      ? (payload[0] << 8) | payload[1]
      : CLOSE_NO_STATUS;
    const reason = new TextDecoder().decode(payload.slice(2));
    this.#closeEvent ??= { code, reason };
    if (this.readyState === WebSocket.OPEN) {
      this.readyState = WebSocket.CLOSING;
      const echo = code === CLOSE_NO_STATUS ? 1000 : code;
      this.#write(encodeFrame(OPCODE.close, closePayload(echo, "")));
    }
    return false;
  }

  /** Closes with `code` (nothing more is read); returns false. */
  #fail(code: number, reason: string): boolean {
    this.close(code, reason);
    return false;
  }

  /** Drops the connection and reports `close` once. */
  #finish(): void {
    if (this.readyState === WebSocket.CLOSED) return;
    this.readyState = WebSocket.CLOSED;
    clearInterval(this.#idleTimer);
    clearTimeout(this.#closeTimer);
    this.#buffer.consume(this.#buffer.length);
    this.#fragments = [];
    try {
      this.#conn.close();
    } catch { /* already closed */ }
    const { code, reason } = this.#closeEvent ??
      { code: CLOSE_ABNORMAL, reason: "" };
    this.dispatchEvent(
      new CloseEvent("close", {
        code,
        reason,
        wasClean: code !== CLOSE_ABNORMAL,
      }),
    );
  }
}
